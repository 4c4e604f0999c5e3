"""A tool_search reads the visibility version row once (issue 9): the kept token's confirmation, the visible
set, the kept descriptors and the audit event's policy number all key on that one read, and a change
committed before the search still shows in its answer."""

from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from governance.models import PolicyVersion, VisibilityVersion
from governance.selectors import policy_version_number
from governance.services.policy import policy_version_bump
from governance.services.tokens import api_token_create
from governance.writebehind import write_behind_flush
from mcpgateway.auth import TokenCache, access_confirm
from mcpgateway.tools import _search_result
from tests.governance.factories import in_days

from .test_search_descriptors import catalog  # noqa: F401 - the fixture
from .test_token_cache import keep, next_request

pytestmark = pytest.mark.django_db
SEARCH = {"query": "current time in a timezone", "top_k": 5, "operation_class": None, "environment": None}


def version_reads(queries: CaptureQueriesContext) -> int:
    table = VisibilityVersion._meta.db_table
    return sum(1 for query in queries if table in query["sql"] and query["sql"].lstrip().upper().startswith("SELECT"))


def search(worker: TokenCache, raw: str) -> tuple[CaptureQueriesContext, object]:
    """One tool_search as the gateway runs it for a token this process keeps: confirm, search, render."""
    access = next_request(worker, raw)
    with CaptureQueriesContext(connection) as queries:
        result = _search_result(access=access, principal=None, scope="all", **SEARCH)
    # What access_confirm set: the principal the search ran as (the tools module patches it for this).
    assert access._confirmed and not access._refused
    return queries, result


def test_a_search_reads_the_version_row_once(catalog, member):  # noqa: F811 - the fixture
    _, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    worker = TokenCache()
    keep(worker, raw)
    search(worker, raw)  # fills the visible set, the descriptors and the policy number
    for _ in range(2):
        queries, result = search(worker, raw)
        assert result.structured_content["matches"][0]["tool_id"] == "clock::get_current_time"
        assert version_reads(queries) == 1, [query["sql"] for query in queries]


def test_a_rest_search_reads_the_version_row_once(catalog, member):  # noqa: F811 - the fixture
    """The REST search and scout_context call gateway_search directly: the same one read."""
    from governance.principals import principal_for_user
    from mcpgateway.services.discovery import gateway_search

    principal = principal_for_user(member)
    gateway_search(principal=principal, query=SEARCH["query"], client="api")  # fills what it keeps
    for _ in range(2):
        with CaptureQueriesContext(connection) as queries:
            answer = gateway_search(principal=principal, query=SEARCH["query"], client="api")
        assert answer.matches[0]["tool_id"] == "clock::get_current_time"
        assert version_reads(queries) == 1, [query["sql"] for query in queries]


def test_a_change_by_another_process_shows_on_the_next_search(catalog, member):  # noqa: F811 - the fixture
    """Another process's change reaches this one only through the database: the tool's row and the version
    row rewritten in its transaction (here without this process's signals or services)."""
    from catalog.models import Tool

    _, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    worker = TokenCache()
    keep(worker, raw)
    _, result = search(worker, raw)
    assert result.structured_content["matches"][0]["title"] == "Current time"
    Tool.objects.filter(tool_id="clock::get_current_time").update(title="Time now")
    VisibilityVersion.objects.filter(pk=1).update(token="written-by-another-process")
    _, result = search(worker, raw)
    assert result.structured_content["matches"][0]["title"] == "Time now"


def test_a_revoked_token_is_refused_although_the_search_reads_the_row_once(catalog, member):  # noqa: F811
    from governance.models import ApiToken
    from governance.services.tokens import api_token_revoke

    token, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    worker = TokenCache()
    keep(worker, raw)
    api_token_revoke(token=ApiToken.objects.get(pk=token.pk))
    access = next_request(worker, raw)
    with pytest.raises(Exception, match="Authentication required"):
        _search_result(access=access, principal=None, scope="all", **SEARCH)
    assert access._refused and access_confirm(access, worker) is None


def test_the_audit_event_records_the_policy_version_in_force(catalog, member, superuser):  # noqa: F811
    """The number is kept per process under the version row: a new policy version shows on the next event."""
    from governance.models import AuditEvent

    _, raw = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    worker = TokenCache()
    keep(worker, raw)
    before = policy_version_number()
    search(worker, raw)
    policy_version_bump(reason="test", actor=superuser)
    assert PolicyVersion.objects.order_by("-number").first().number == before + 1
    search(worker, raw)
    write_behind_flush()
    events = AuditEvent.objects.filter(payload__meta_tool="tool_search").order_by("pk")
    numbers = list(events.values_list("policy_version", flat=True))
    assert numbers == [before, before + 1]
