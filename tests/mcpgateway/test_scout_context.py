"""``manage.py scout_context``: token figures of the full listing against the meta-tools plus an answer."""

from __future__ import annotations

import io
import json

import pytest
from django.core.management import call_command

from .conftest import build_index, grant, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _figures(username: str) -> dict:
    out = io.StringIO()
    call_command("scout_context", "--user", username, "--json", "--query", "what time is it in Tokyo", stdout=out)
    return json.loads(out.getvalue())


def test_reports_the_visible_catalog_against_the_meta_tools(admin_user, time_server, calc_server):
    member, outsider = make_user("gw_member"), make_user("gw_outsider")
    grant(admin_user, time_server, member, "discover")
    grant(admin_user, calc_server, member, "discover")
    build_index()

    seen = _figures("gw_member")
    assert seen["visible_tools"] == 4
    assert seen["full_tools_list_tokens"] > 0 and seen["meta_tools_tokens"] > 0
    assert seen["search_answer_tokens_median"] > 0 and seen["sample_queries"] == 1
    assert seen["scout_tokens"] == seen["meta_tools_tokens"] + seen["search_answer_tokens_median"]

    nothing = _figures("gw_outsider")
    assert nothing["visible_tools"] == 0 and nothing["full_tools_list_tokens"] < seen["full_tools_list_tokens"]
    assert outsider.username == "gw_outsider"


def test_unknown_user_is_a_clear_error(transactional_db):
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="no user named"):
        call_command("scout_context", "--user", "nobody")
