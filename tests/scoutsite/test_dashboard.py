"""The operators' dashboard: figures from the query log and the audit trail, per window; operators only."""

from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

from governance.principals import principal_for_user
from governance.services.audit import audit_record
from scoutsite.dashboard import WINDOWS, dashboard_figures
from search.usage import LoggedResult, query_log_record
from tests.governance.factories import ServerFactory, ToolFactory

pytestmark = pytest.mark.django_db


def seed_traffic(user) -> None:
    principal = principal_for_user(user)
    for confidence, latency in (("high", 10.0), ("high", 20.0), ("low", 30.0), ("none", 40.0)):
        query_log_record(
            principal=principal,
            query="q",
            results=[LoggedResult(tool_id="calc::add", score=0.9)],
            confidence=confidence,
            degraded=False,
            backend="embedded",
            latency_ms=latency,
        )
    tools = {}
    for tool_id in ("calc::add", "time::now", "faulty::crash"):
        slug, name = tool_id.split("::")
        tools[tool_id] = ToolFactory(server=ServerFactory(slug=slug), name=name)
    for outcome, tool_id, duration in (
        ("success", "calc::add", 100.0),
        ("success", "calc::add", 200.0),
        ("success", "time::now", 300.0),
        ("error", "faulty::crash", 400.0),
    ):
        audit_record(
            event_type="execution",
            principal=principal,
            tool=tools[tool_id],
            outcome=outcome,
            payload={"meta_tool": "execute_tool", "duration_ms": duration},
        )


def test_figures_count_searches_executions_rates_and_failures(member):
    seed_traffic(member)
    figures = dashboard_figures(window=WINDOWS["1h"])
    assert sum(figures["searches"]) == 4 and sum(figures["executions"]) == 4
    assert figures["withheld_rate"] == 0.25 and figures["low_rate"] == 0.25
    assert figures["search_latency_ms"]["p50"] == 25.0
    assert figures["top_tools"] == [["calc::add", 2], ["time::now", 1]] or figures["top_tools"] == [
        ("calc::add", 2),
        ("time::now", 1),
    ]
    assert dict(figures["failures_by_server"]) == {"faulty": 1}
    assert sum(figures["execution_failures"]) == 1
    later = dashboard_figures(window=WINDOWS["1h"], now=timezone.now() + timedelta(hours=2))
    assert sum(later["searches"]) == 0 and later["withheld_rate"] is None  # outside the window


def test_the_time_axis_reads_as_every_other_time_in_the_admin():
    """Its ticks: a 24-hour clock in the admin's time zone (the browser drew "03:28 PM" beside "2026-12-06 15:27")."""
    now = datetime(2026, 12, 6, 15, 28, tzinfo=UTC)
    day = dashboard_figures(window=WINDOWS["24h"], now=now)
    assert day["ticks"][:3] == ["15:28", "16:28", "17:28"] and day["ticks"][9] == "00:28"
    assert day["time_zone"] == "UTC"
    assert dashboard_figures(window=WINDOWS["7d"], now=now)["ticks"][:2] == ["11-29 15:28", "11-29 21:28"]
    assert dashboard_figures(window=WINDOWS["30d"], now=now)["ticks"][0] == "2026-11-06"


def test_operators_only(client, django_user_model):
    staff = django_user_model.objects.create_user(username="staff", is_staff=True)
    client.force_login(staff)
    assert client.get("/admin/dashboard/").status_code == 403
    assert client.get("/admin/dashboard/data.json").status_code == 403
    staff.user_permissions.add(Permission.objects.get(codename="view_server", content_type__app_label="catalog"))
    assert client.get("/admin/dashboard/?window=7d").status_code == 200
    assert client.get("/admin/dashboard/data.json?window=1h").json()["window"] == "1h"
    client.logout()
    assert client.get("/admin/dashboard/").status_code == 302  # to the login page


EMPTY_SENTENCES = {
    "chart-traffic": "No searches or tool calls in the last hour.",
    "chart-latency": "No latency to show for the last hour",
    "chart-tools": "No successful tool calls in the last hour.",
    "chart-failures": "No failed tool calls in the last hour.",
    "chart-syncs": "No sync runs in the last hour.",
    "chart-servers": "No servers yet.",
}


def _charts_and_sentences(client) -> tuple[set[str], dict[str, str]]:
    import re

    html = client.get("/admin/dashboard/?window=1h").content.decode()
    canvases = set(re.findall(r'<canvas id="([\w-]+)"', html))
    sentences = dict(re.findall(r'<p class="dash-empty" id="([\w-]+)-empty">([^<]*)</p>', html))
    return canvases, sentences


def test_a_chart_without_data_says_so_instead_of_drawing_empty_axes(client, superuser):
    client.force_login(superuser)
    canvases, sentences = _charts_and_sentences(client)
    assert canvases == set()
    assert set(sentences) == set(EMPTY_SENTENCES)
    for chart, sentence in EMPTY_SENTENCES.items():
        assert sentence in sentences[chart], chart


def test_charts_with_data_are_drawn_and_the_others_still_say_why_not(client, superuser, member):
    seed_traffic(member)
    client.force_login(superuser)
    canvases, sentences = _charts_and_sentences(client)
    assert canvases == {"chart-traffic", "chart-latency", "chart-tools", "chart-failures", "chart-servers"}
    assert set(sentences) == {"chart-syncs"}  # seeded servers were never synced


def _tile_link(html: str, tile: str) -> str | None:
    import re

    found = re.search(rf'id="{tile}"><a href="([^"]+)"', html)
    return found.group(1).replace("&amp;", "&") if found else None


def test_search_tiles_lead_to_those_searches_in_the_query_log(client, django_user_model, member):
    """ "25% withheld" is a question a curator wants answered with the requests themselves: each search tile
    opens the query log at the same searches; without the query log (an operator) they open the searches' counts per
    backend and server (adminux36: they were plain numbers, and an operator read searches nowhere else)."""
    from django.contrib.auth.models import Group

    from governance.roles import CURATORS, OPERATORS

    seed_traffic(member)
    query_log_record(  # older than the window: counted by neither the tile nor the list it opens
        principal=principal_for_user(member), query="old", results=[], confidence="none", degraded=False,
        backend="embedded", latency_ms=1.0,
    )  # fmt: skip
    from search.models import QueryLogEntry

    QueryLogEntry.objects.filter(query="old").update(created_at=timezone.now() - timedelta(hours=3))
    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(curator)
    html = client.get("/admin/dashboard/?window=1h").content.decode()
    for tile, expected in (("tile-searches", 4), ("tile-withheld", 1), ("tile-low", 1)):
        listing = client.get(_tile_link(html, tile))
        assert listing.status_code == 200, tile
        assert listing.context["cl"].result_count == expected, tile
    operator = django_user_model.objects.create_user(username="op", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    client.force_login(operator)
    html = client.get("/admin/dashboard/?window=1h").content.decode()
    for tile in ("tile-searches", "tile-withheld", "tile-low"):
        assert _tile_link(html, tile) == "/admin/searches/?window=1h", tile


def test_a_search_tile_of_none_is_no_link_to_an_empty_query_log(client, django_user_model, member):
    """Adminux24: "0%" withheld linked a curator to an empty query log; a tile counting nothing is plain, the others
    still link."""
    from django.contrib.auth.models import Group

    from governance.roles import CURATORS

    query_log_record(
        principal=principal_for_user(member), query="q", results=[LoggedResult(tool_id="calc::add", score=0.9)],
        confidence="high", degraded=False, backend="embedded", latency_ms=1.0,
    )  # fmt: skip
    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(curator)
    html = client.get("/admin/dashboard/?window=1h").content.decode()
    assert _tile_link(html, "tile-searches") is not None
    assert _tile_link(html, "tile-withheld") is None and 'id="tile-withheld">0%<' in html
    assert _tile_link(html, "tile-low") is None and 'id="tile-low">0%<' in html


def test_dashboard_window(client, superuser, member):
    """The dashboard offers the curator workbench's window (WORKBENCH_DAYS): a request withheld 20 days ago is
    counted there, as the workbench lists it, and not in the last 7 days."""
    from search.models import QueryLogEntry
    from search.workbench import WORKBENCH_DAYS

    assert WINDOWS["30d"].span == timedelta(days=WORKBENCH_DAYS) and WINDOWS["30d"].label == "last 30 days"
    query_log_record(principal=principal_for_user(member), query="file my expenses", results=[], confidence="none",
                     degraded=False, backend="embedded", latency_ms=5.0)  # fmt: skip
    QueryLogEntry.objects.update(created_at=timezone.now() - timedelta(days=20))
    client.force_login(superuser)
    week = client.get("/admin/dashboard/?window=7d")
    assert week.context["figures"]["search_total"] == 0
    month = client.get("/admin/dashboard/?window=30d")
    assert month.context["figures"]["search_total"] == 1 and month.context["figures"]["withheld_rate"] == 1.0
    html = month.content.decode()
    assert '<a href="?window=30d" class="current">last 30 days</a>' in html
    workbench = client.get("/admin/search/workbench/")
    assert [group.text for group in workbench.context["groups"]] == ["file my expenses"]
    assert "in the last 30 days" in workbench.content.decode()
