"""A token older than SCOUT_TOKEN_MAX_DAYS (made before the limit with an expiry years ahead) is refused on /mcp as
expired, and its holder is told so (redteam35)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.utils import timezone

from .conftest import challenge_params, gateway_db, make_token, make_user, modern_request, raw_post

pytestmark = [gateway_db, pytest.mark.slow]


def test_a_token_older_than_the_limit_is_refused_as_expired(gateway, settings):
    from governance.cache import visibility_invalidate
    from governance.models import ApiToken

    settings.SCOUT_TOKEN_MAX_DAYS = 365
    raw = make_token(make_user("gw_old"), ["discover"])
    assert raw_post(gateway, modern_request("tools/list"), token=raw).status_code == 200
    ApiToken.objects.filter(display_prefix=raw[:10]).update(
        created_at=timezone.now() - timedelta(days=366), expires_at=timezone.now() + timedelta(days=3000)
    )
    visibility_invalidate()  # as a process started after the upgrade would: none keeps the token (update(): no signal)
    response = raw_post(gateway, modern_request("tools/list"), token=raw)
    assert response.status_code == 401
    assert challenge_params(response)["error_description"] == "The access token expired"
