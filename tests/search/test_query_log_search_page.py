"""The query log's search answers a page, not the whole log: counted only up to the page shown, no date hierarchy or
filter choices read from every row, and (on Postgres) statistics on the searched text so a word every search holds
walks the time index to the first page instead of sorting every match."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from search.models import QueryLogEntry

pytestmark = pytest.mark.django_db
URL = reverse("admin:search_querylogentry_changelist")


def _fill(count: int) -> None:
    now = timezone.now()
    QueryLogEntry.objects.bulk_create(
        QueryLogEntry(
            created_at=now - timezone.timedelta(minutes=i),
            principal_key="user:1",
            log_mode="full",
            query=f"please list the thing {i}",
            confidence="high",
            backend="embedded",
        )
        for i in range(count)
    )


def _reads_of_the_log(queries) -> list[str]:
    return [query["sql"] for query in queries if "search_querylogentry" in query["sql"]]


def test_a_search_matching_nothing_reads_the_log_once(client, superuser):
    """Before: a COUNT, the date hierarchy's first and last time and its years, and the backend and client filters'
    choices, each over the whole log (six reads; 1.2 s at 100k searches)."""
    _fill(30)
    client.force_login(superuser)
    with CaptureQueriesContext(connection) as queries:
        page = client.get(URL, {"q": "nomatchxyz"})
    assert page.status_code == 200
    reads = _reads_of_the_log(queries.captured_queries)
    assert len(reads) == 1 and "COUNT(" not in reads[0].upper(), reads
    assert "0 searches" in page.content.decode()


def test_a_search_past_one_page_says_more_match_and_leads_on(client, superuser):
    _fill(130)
    client.force_login(superuser)
    with CaptureQueriesContext(connection) as queries:
        first = client.get(URL, {"q": "thing"}).content.decode()
    assert len(_reads_of_the_log(queries.captured_queries)) == 1
    assert "More than 100 searches match: a search of the log is counted only up to the page shown." in first
    assert "more than 100 results" in first
    assert "?p=2&amp;q=thing" in first
    assert "Show all" not in first.split('id="toolbar"')[0]  # never every match at once
    second = client.get(URL, {"q": "thing", "p": 2})
    assert "130 searches" in second.content.decode() and "count-stopped" not in second.content.decode()
    assert len(second.context["cl"].result_list) == 30


def test_the_filters_still_narrow_the_log(client, superuser):
    """When, backend and client offered without reading the log: each still filters (the dashboard's link too)."""
    _fill(3)
    QueryLogEntry.objects.filter(query="please list the thing 0").update(backend="weaviate", client="api")
    QueryLogEntry.objects.filter(query="please list the thing 2").update(
        created_at=timezone.now() - timezone.timedelta(days=40)
    )
    client.force_login(superuser)
    html = client.get(URL).content.decode()
    for choice in ("?backend=weaviate", "?backend=embedded", "?client=api", "?client=mcp", "Past 7 days"):
        assert choice in html, choice

    def shown(params) -> list[str]:
        return sorted(entry.query for entry in client.get(URL, params).context["cl"].result_list)

    assert shown({"backend": "weaviate"}) == shown({"client": "api"}) == ["please list the thing 0"]
    assert shown({"client": "mcp"}) == ["please list the thing 1", "please list the thing 2"]
    since = (timezone.now() - timezone.timedelta(days=7)).isoformat()
    assert shown({"created_at__gte": since}) == ["please list the thing 0", "please list the thing 1"]


@pytest.mark.skipif(
    connection.vendor != "postgresql", reason="statistics on an expression are Postgres's (14 and later)"
)
def test_a_word_every_search_holds_walks_the_time_index_on_postgres(superuser):
    """Without statistics on UPPER(query) Postgres guesses a few matching rows, reads every match and sorts them all
    (0.4 s at 100k); with them it reads the time index backwards until the page is full."""
    from django.contrib import admin
    from django.test import RequestFactory

    _fill(5000)
    with connection.cursor() as cursor:
        cursor.execute("ANALYZE search_querylogentry")
    request = RequestFactory().get(URL, {"q": "thing"})
    request.user = superuser
    model_admin = admin.site.get_model_admin(QueryLogEntry)
    changelist = model_admin.get_changelist_instance(request)
    sql, params = changelist.queryset[:101].query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute(f"EXPLAIN {sql}", params)
        plan = "\n".join(row[0] for row in cursor.fetchall())
    assert "Index Scan Backward" in plan and "created_at" in plan, plan
