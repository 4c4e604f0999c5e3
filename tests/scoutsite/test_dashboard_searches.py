"""The dashboard's searches by backend and server: what an operator reads of agents' searches (counts, time, withheld
and low-confidence shares, the calls that followed), never a request's words, and only their tenants' (Z12)."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.models import ServerTenant
from governance.principals import principal_for_user
from governance.roles import OPERATORS
from governance.services.audit import audit_record
from search.models import SearchEvent, SearchOutcome
from search.usage import LoggedResult, query_log_record
from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

pytestmark = pytest.mark.django_db


def _search(user, query: str, tool_ids: list[str], *, confidence: str, backend="embedded", latency=10.0, **extra):
    return query_log_record(
        principal=principal_for_user(user),
        query=query,
        results=[LoggedResult(tool_id=tool_id, score=0.5) for tool_id in tool_ids],
        confidence=confidence,
        degraded=extra.pop("degraded", False),
        backend=backend,
        latency_ms=latency,
        **extra,
    )


@pytest.fixture
def world(django_user_model, member, outsider):
    """Tenant A's operator and member, tenant B's outsider; a shared server, one of each tenant, each with a tool;
    searches and calls of both tenants."""
    operator = django_user_model.objects.create_user(username="op-a", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    tenant_a, tenant_b = tenant_with("tenant-a", operator, member), tenant_with("tenant-b", outsider)
    tools = {}
    for slug, tenant in (("shared-srv", None), ("alpha-srv", tenant_a), ("bravo-srv", tenant_b)):
        server = ServerFactory(slug=slug)
        if tenant is not None:
            ServerTenant.objects.create(server=server, tenant=tenant)
        tools[slug] = ToolFactory(server=server, name="tool")
    listed = _search(member, "zq alpha listed", ["alpha-srv::tool", "shared-srv::tool"], confidence="high")
    _search(member, "zq alpha unsure", ["shared-srv::tool"], confidence="low", latency=30.0)
    _search(member, "zq alpha withheld", [], confidence="none", backend="weaviate", latency=50.0)
    _search(outsider, "zq bravo private", ["bravo-srv::tool"], confidence="high", latency=900.0)
    SearchOutcome.objects.create(entry=listed, tool=tools["alpha-srv"], outcome="success")
    for slug, outcome, duration in (
        ("alpha-srv", "success", 100),
        ("alpha-srv", "error", 300),
        ("bravo-srv", "success", 7),
    ):
        audit_record(
            event_type="execution",
            principal=principal_for_user(outsider if slug == "bravo-srv" else member),
            tool=tools[slug],
            outcome=outcome,
            payload={"duration_ms": duration},
        )
    return {"operator": operator, "tools": tools}


def _rows(html: str, attribute: str) -> dict[str, str]:
    """Each table row's text by its ``data-<attribute>``."""
    import re

    rows = re.findall(rf'<tr data-{attribute}="([^"]+)">(.*?)</tr>', html, re.S)
    return {key: " ".join(re.sub(r"<[^>]+>", " ", body).split()) for key, body in rows}


def test_an_operator_reads_counts_per_backend_and_server_and_no_words(client, world):
    client.force_login(world["operator"])
    page = client.get(reverse("dashboard_searches"), {"window": "1h"})
    html = page.content.decode()
    assert page.status_code == 200
    backends = _rows(html, "backend")
    # Tenant A's three searches (B's is not counted): two on embedded, one withheld on weaviate.
    assert backends == {
        "embedded": "embedded 2 0 (0%) 1 (50%) 0 20 / 29 ms",
        "weaviate": "weaviate 1 1 (100%) 0 (0%) 0 50 / 50 ms",
    }
    servers = _rows(html, "server")
    assert set(servers) == {"alpha-srv", "shared-srv"}  # tenant B's server is not named
    assert servers["alpha-srv"] == "alpha-srv 1 1 0 (0%) 1 (1 succeeded) 2 1 200 / 290 ms"
    assert servers["shared-srv"] == "shared-srv 2 1 1 (50%) 0 0 0 –"
    assert "Withheld: no tool fits (the search&#x27;s rule): 1" in html
    assert "zq " not in html and "bravo" not in html


def test_the_dashboards_tiles_lead_an_operator_here_and_a_curator_to_the_query_log(client, world, django_user_model):
    client.force_login(world["operator"])
    dashboard = client.get(reverse("dashboard"), {"window": "1h"}).content.decode()
    assert f'href="{reverse("dashboard_searches")}?window=1h">3</a>' in dashboard  # the searches tile
    assert 'id="dash-searches-link"' in dashboard


def test_fallbacks_are_read_by_who_may_read_the_whole_install(client, world, superuser):
    SearchEvent.objects.create(kind="model_unavailable", detail="encoder down")
    client.force_login(world["operator"])  # the install has tenants: the index's events are a superuser's
    assert "Search fallbacks" not in client.get(reverse("dashboard_searches")).content.decode()
    client.force_login(superuser)
    html = client.get(reverse("dashboard_searches")).content.decode()
    assert "Embedding model unavailable: BM25 only: 1" in html
    assert set(_rows(html, "server")) == {"alpha-srv", "bravo-srv", "shared-srv"}


def test_refuses_who_may_not_open_the_dashboard(client, django_user_model):
    client.force_login(django_user_model.objects.create_user(username="staff", is_staff=True))
    assert client.get(reverse("dashboard_searches")).status_code == 403


def test_past_the_rows_it_reads_every_figure_is_of_the_same_newest_searches(client, world, monkeypatch):
    """redteam60 (Low, robustness): past ``MAX_ROWS`` searches the page counted its tools listed in the newest
    ``MAX_ROWS`` only, but the calls linked to searches in every search of the period: a server read "called after a
    search" more often than any search listed it. Here the page reads the two newest of tenant A's three searches;
    the call is linked to the oldest."""
    from datetime import timedelta

    from django.utils import timezone

    from search import traffic
    from search.models import QueryLogEntry

    now = timezone.now()
    for minutes, words in ((30, "zq alpha listed"), (20, "zq alpha unsure"), (10, "zq alpha withheld")):
        QueryLogEntry.objects.filter(query=words).update(created_at=now - timedelta(minutes=minutes))
    monkeypatch.setattr(traffic, "MAX_ROWS", 2)
    client.force_login(world["operator"])
    html = client.get(reverse("dashboard_searches"), {"window": "1h"}).content.decode()
    assert 'id="searches-truncated"' in html
    listed, first, low, after = _rows(html, "server")["alpha-srv"].split()[1:5]
    assert (listed, first, after) == ("0", "0", "0"), _rows(html, "server")
    # A window of exactly the rows read left nothing out, and says nothing was.
    monkeypatch.setattr(traffic, "MAX_ROWS", 3)
    html = client.get(reverse("dashboard_searches"), {"window": "1h"}).content.decode()
    assert 'id="searches-truncated"' not in html
    assert "1 (1 succeeded)" in _rows(html, "server")["alpha-srv"], _rows(html, "server")


def test_an_approver_is_refused_and_an_unknown_period_is_the_last_24_hours(client, world, django_user_model):
    from governance.roles import APPROVERS

    approver = django_user_model.objects.create_user(username="appr", is_staff=True)
    approver.groups.add(Group.objects.get(name=APPROVERS))
    client.force_login(approver)
    assert client.get(reverse("dashboard_searches")).status_code == 403
    client.force_login(world["operator"])
    for window in ("bogus", "", "7d' OR 1=1", "1H"):
        page = client.get(reverse("dashboard_searches"), {"window": window})
        assert page.status_code == 200 and "in the last 24 hours" in page.content.decode(), window
