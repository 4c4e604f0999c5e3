"""Audit trail search: counted only up to the page shown, so a search matching nothing reads the trail once (for the
page), never again for a COUNT; past the page the list says that more match, not how many."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from governance.choices import AuditEventType, AuditOutcome
from governance.models import AuditEvent

pytestmark = pytest.mark.django_db
URL = reverse("admin:governance_auditevent_changelist")


@pytest.fixture
def trail():
    AuditEvent.objects.bulk_create(
        AuditEvent(
            created_at=timezone.now(),
            event_type=AuditEventType.EXECUTION,
            outcome=AuditOutcome.SUCCESS,
            tool_ref=f"srv::thing_{i:03d}",
        )
        for i in range(150)
    )


def _searches(queries) -> list[str]:
    """The queries that read the trail for the search (the list filters read it apart, for their choices)."""
    return [query["sql"] for query in queries if "nomatchxyz" in query["sql"]]


def test_a_search_matching_nothing_reads_the_trail_once_without_counting(client, superuser, trail):
    client.force_login(superuser)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(URL, {"q": "nomatchxyz"})
    assert page.status_code == 200
    read = _searches(queries.captured_queries)
    assert not [sql for sql in read if "COUNT(" in sql.upper()], read
    assert len(read) == 1, read
    assert "0 audit events" in page.content.decode()


def test_a_search_past_one_page_says_more_match_and_leads_on(client, superuser, trail):
    client.force_login(superuser)
    first = client.get(URL, {"q": "thing"}).content.decode()
    assert "More than 100 events match: a search is counted only up to the page shown." in first
    assert "more than 100 results" in first
    assert "?p=2&amp;q=thing" in first
    assert "Show all" not in first.split('id="toolbar"')[0]  # never every match at once
    second = client.get(URL, {"q": "thing", "p": 2}).content.decode()
    assert "150 audit events" in second
    assert "count-stopped" not in second


def test_an_unsearched_list_still_counts(client, superuser, trail):
    client.force_login(superuser)
    assert "150 audit events" in client.get(URL).content.decode()
