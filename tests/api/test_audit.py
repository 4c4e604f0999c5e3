"""/api/v1/audit/: the trail, filtered and paginated, for staff with governance.view_auditevent only."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.api.conftest import api_db, error_of, give_perms, make_token

pytestmark = api_db


@pytest.fixture
def auditor(owner):
    give_perms(owner, "governance.view_auditevent")
    return make_token(owner, ["api"])


@pytest.fixture
def events(catalog, member):
    """Searches by member (discovery) plus the grant and token events the fixtures wrote."""
    from governance.principals import principal_for_user
    from mcpgateway.services.discovery import gateway_search

    for _ in range(3):
        gateway_search(principal=principal_for_user(member), query="list issues")


def test_read_and_filter(api, auditor, events):
    body = api.get("audit/?event_type=discovery", token=auditor).json()
    assert body["count"] == 3
    assert {e["user"] for e in body["results"]} == {"member"}
    assert api.get("audit/?user=member&event_type=discovery&outcome=success", token=auditor).json()["count"] == 3
    assert api.get("audit/?user=nobody", token=auditor).json()["count"] == 0
    grants = api.get("audit/?event_type=grant", token=auditor).json()
    assert grants["count"] >= 1
    one = api.get(f"audit/{body['results'][0]['id']}/", token=auditor)
    assert one.status_code == 200 and one.json()["event_type"] == "discovery"


def test_time_range_and_tool(api, auditor, events, catalog):
    from governance.choices import AuditEventType, AuditOutcome
    from governance.services.audit import audit_record

    audit_record(
        event_type=AuditEventType.EXECUTION,
        principal=None,
        tool=catalog.visible,
        outcome=AuditOutcome.DENIED,
        payload={},
    )
    future = (timezone.now() + timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    past = (timezone.now() - timedelta(hours=1)).isoformat().replace("+00:00", "Z")
    assert api.get(f"audit/?since={future}", token=auditor).json()["count"] == 0
    total = api.get("audit/", token=auditor).json()["count"]
    assert api.get(f"audit/?since={past}&until={future}", token=auditor).json()["count"] == total
    assert api.get(f"audit/?until={past}", token=auditor).json()["count"] == 0
    tool = api.get("audit/?tool=github::list_issues", token=auditor).json()
    assert tool["count"] == 1 and tool["results"][0]["outcome"] == "denied"


def test_pagination(api, auditor, events):
    total = api.get("audit/", token=auditor).json()["count"]
    page = api.get("audit/?page_size=2", token=auditor).json()
    assert page["count"] == total and len(page["results"]) == 2 and page["next"]


def test_bad_filters(api, auditor):
    for query, field in [
        ("since=yesterday", "since"),
        ("until=2026-01-01T00:00:00", "until"),
        ("event_type=x", "event_type"),
    ]:
        response = api.get(f"audit/?{query}", token=auditor)
        assert response.status_code == 400 and field in error_of(response)["fields"], query


def test_times_at_the_edge_of_the_calendar_are_a_400_or_filter_not_a_500(api, auditor, events):
    """An offset Postgres refuses (past 15:59) was a 500 there, and a time past year 9999 (or before year 1) in UTC
    a 500 on SQLite: the times are compared in UTC, and one the calendar cannot hold is a 400 naming the parameter."""
    total = api.get("audit/", token=auditor).json()["count"]
    wide_offset = api.get("audit/?since=2000-01-01T00:00:00-23:59&until=2999-01-01T00:00:00%2B23:59", token=auditor)
    assert wide_offset.status_code == 200 and wide_offset.json()["count"] == total
    for query, field in [("until=9999-12-31T23:59:59-14:00", "until"), ("since=0001-01-01T00:00:00%2B14:00", "since")]:
        response = api.get(f"audit/?{query}", token=auditor)
        assert response.status_code == 400 and field in error_of(response)["fields"], query


def test_refused_without_staff_or_permission(api, events, member, approver):
    give_perms(member, "governance.view_auditevent")  # not staff
    for token in (make_token(member, ["api"]), make_token(approver, ["api"])):  # approver: staff, no permission
        response = api.get("audit/", token=token)
        assert response.status_code == 403 and error_of(response)["code"] == "permission_denied"
        assert "discovery" not in response.text
