"""The operator's token list and audit trail fit beside the navigation and filter sidebars at 1280 px: every column
in view, no sideways scrolling (long tool ids break)."""

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from governance.principals import principal_for_user
from governance.roles import CURATORS, OPERATORS
from governance.services.audit import audit_record
from governance.services.tokens import api_token_create, api_token_verify
from search.choices import GenerationKind, GenerationStatus
from search.models import IndexGeneration
from tests.governance.factories import ServerFactory, ToolFactory, agent_of, in_days, tenant_with

from .conftest import admin_login, approver_and_tool, learned_by_teachers, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
FITS = "const e = document.querySelector('#changelist .results'); return e.scrollWidth <= e.clientWidth;"


def test_token_list_and_audit_trail_fit_at_1280(browser, live_server, django_user_model):
    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    member = django_user_model.objects.create_user(username="alice.longname@example.com")
    acme = tenant_with("acme-corporation", member, operator)
    server = ServerFactory(slug="github-enterprise-production")
    tool = ToolFactory(server=server, name="list_repository_collaborators_with_permissions")
    api_token_create(
        user=member,
        name="claude code on the build machine",
        agent=agent_of(member, "release-triage-agent", tenant=acme, all_user_tools=True),
        scopes=["api", "discover", "execute", f"server:{server.slug}"],
        expires_at=in_days(90),
    )
    audit_record(event_type="execution", principal=principal_for_user(member), tool=tool, outcome="success")
    admin_login(browser, live_server.url, "op", "pw-op-123")
    for page in ("governance/apitoken", "governance/auditevent"):
        browser.get(f"{live_server.url}/admin/{page}/")
        assert browser.find_elements("css selector", "#result_list tbody tr"), page
        screenshot(browser, f"operator-{page.split('/')[1]}-list")
        assert browser.execute_script(FITS), f"{page}: the list scrolls sideways at 1280 px"


def test_the_curators_learned_requests_fit_and_read_at_1280_and_800(browser, live_server, django_user_model):
    """Every column in view, and the request's words, what the curator decides on, read in a line or two: in the demo,
    "what time is it in Tokyo" took three lines at 1280 px (four at 800) while the sorted counts' headers kept their
    room. Then a long request beside them: still no sideways scrolling."""
    curator = django_user_model.objects.create_user(username="cur", password="pw-cur-123", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    learned_by_teachers(ToolFactory(server=ServerFactory(slug="time"), name="get_current_time"),
                        "what time is it in Tokyo", 1, key="k1")  # fmt: skip
    git_log = ToolFactory(server=ServerFactory(slug="git"), name="git_log")
    learned_by_teachers(git_log, "show me the latest commits", 2, key="k2")
    git_log.examples.create(text="show me the latest commits")  # its status says "already an example request"
    admin_login(browser, live_server.url, "cur", "pw-cur-123")
    for width, lines in ((1280, 1), (800, 2)):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/search/learnedrequest/")
        screenshot(browser, f"curator-learnedrequest-list-{width}")
        tokyo = browser.find_element("link text", "what time is it in Tokyo")
        assert browser.execute_script("return arguments[0].getClientRects().length;", tokyo) <= lines, width
        assert browser.execute_script(FITS), f"learned requests: the list scrolls sideways at {width} px"
    tool = ToolFactory(server=ServerFactory(slug="github-enterprise-production"), name="list_repository_collaborators")
    text = "who can push to the release branch of the payments service repository and since when"
    learned_by_teachers(tool, text, 3, key="k3")
    for width in (1280, 800):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/search/learnedrequest/")
        assert len(browser.find_elements("css selector", "#result_list tbody tr")) == 3
        assert browser.execute_script(FITS), f"learned requests: the list scrolls sideways at {width} px"


def test_the_query_log_fits_at_1280(browser, live_server, django_user_model, member):
    from search.engine.ranking import Confidence
    from search.usage import LoggedResult, query_log_record

    curator = django_user_model.objects.create_user(username="cur", password="pw-cur-123", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    query_log_record(
        principal=principal_for_user(member),
        query="who can push to the release branch of the payments service repository and since when",
        results=[LoggedResult(tool_id="github-enterprise-production::list_repository_collaborators", score=0.3)],
        confidence=Confidence.LOW,
        degraded=True,
        backend="embedded",
        latency_ms=52.75,
    )
    admin_login(browser, live_server.url, "cur", "pw-cur-123", path="/admin/search/querylogentry/")
    row = browser.find_element("css selector", "#result_list tbody tr")
    assert "53 ms" in row.text and "degraded" in row.text  # the unit; "degraded" said in words, not as an icon
    screenshot(browser, "curator-querylog-list")
    assert browser.execute_script(FITS), "query log: the list scrolls sideways at 1280 px"


def test_the_operators_sync_runs_fit_at_1280(browser, live_server, django_user_model):
    """Where an operator watches a new server's syncs: the time over two lines and what each run did to tools in one
    cell ("10 added"), not five count columns pushing the error out of view."""
    from catalog.choices import SyncStatus
    from catalog.models import SyncRun

    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    server = ServerFactory(slug="github-enterprise-production")
    now = timezone.now()
    SyncRun.objects.create(server=server, status=SyncStatus.SUCCESS, source="admin", started_at=now, added=10)
    SyncRun.objects.create(server=server, status=SyncStatus.PARTIAL, source="beat", started_at=now, changed=1,
                           unchanged=8, rejected=1, error="1 tool rejected: inputSchema is not an object")  # fmt: skip
    admin_login(browser, live_server.url, "op", "pw-op-123", path="/admin/catalog/syncrun/")
    counts = [cell.text for cell in browser.find_elements("css selector", "#result_list td.field-tool_counts")]
    assert sorted(counts) == ["1 changed · 1 rejected · 8 unchanged", "10 added"]
    screenshot(browser, "operator-syncrun-list")
    assert browser.execute_script(FITS), "sync runs: the list scrolls sideways at 1280 px"


def test_the_server_list_and_sync_runs_show_health_and_outcome_at_800(browser, live_server, django_user_model):
    """At 800 px (a half screen), beside the navigation, the server list showed 216 px: slug and name, its health
    and last sync scrolled out of sight, as did a run's status and error. The filter now goes under the list, and
    every column left (the server list's name, transport and breaker are on the server's page) is in view."""
    from catalog.choices import ServerStatus, SyncStatus
    from catalog.models import SyncRun

    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    now = timezone.now()
    for slug, status in (("github-enterprise-production", ServerStatus.ACTIVE), ("garbage2", ServerStatus.UNAVAILABLE)):
        server = ServerFactory(slug=slug, name=f"{slug} server", status=status, last_synced_at=now)
        SyncRun.objects.create(server=server, status=SyncStatus.SUCCESS, source="admin", started_at=now, added=13)
    error = "garbage2: malformed OpenAPI document: Swagger / OpenAPI 2.0 is not supported; give 3.0 or 3.1"
    SyncRun.objects.create(server=server, status=SyncStatus.FAILED, source="admin", started_at=now, error=error)
    admin_login(browser, live_server.url, "op", "pw-op-123")
    browser.set_window_size(800, 900)
    page_fits = "return document.documentElement.scrollWidth <= document.documentElement.clientWidth;"
    pages = (("server", ("slug_column", "status_badge", "tool_count", "last_run")), ("syncrun", ("status_column",
             "short_error")))  # fmt: skip
    for page, shown in pages:
        browser.get(f"{live_server.url}/admin/catalog/{page}/")
        assert browser.find_elements("css selector", "#result_list tbody tr"), page
        screenshot(browser, f"operator-{page}-list-800")
        assert browser.execute_script(FITS) and browser.execute_script(page_fits), f"{page}: scrolls sideways at 800 px"
        for field in shown:
            cell = browser.find_element("css selector", f"#result_list tbody .field-{field}")
            assert cell.is_displayed() and cell.rect["x"] + cell.rect["width"] <= 800, (page, field)


def test_the_approval_inbox_fits_at_1280_whatever_the_ids_letters(browser, live_server, django_user_model, member):
    """An approval id is an opaque token in one piece: its column (the row's link, a <th>) wraps it rather than
    pushing "who asked" out of view (ids of wide letters did at 1280 px, with both sidebars open)."""
    from governance.models import ApprovalRequest
    from governance.services.approvals import approval_request_create

    tool = approver_and_tool(django_user_model, member, server="memory", tool="create_entities")
    request = approval_request_create(principal=principal_for_user(member), tool=tool, arguments={"name": "bob"})
    ApprovalRequest.objects.filter(pk=request.pk).update(approval_id="apr_WMWMWMWMWMWMWMWMWMWMWM")
    admin_login(browser, live_server.url, "appr", "pw-appr-123", path="/admin/governance/approvalrequest/")
    assert browser.find_elements("css selector", "#result_list tbody tr")
    screenshot(browser, "approver-inbox-wide-id")
    assert browser.execute_script(FITS), "approval inbox: the list scrolls sideways at 1280 px"


def test_the_tool_revisions_fit_at_1280(browser, live_server, django_user_model, tmp_path):
    """Django's "Dec. 4, 2026, 3:38 p.m." and the run's full name pushed the sync run column out of view: the
    moments are in two short lines, as in the other lists, and a long tool id breaks after :: and _."""
    import json

    from catalog.services.imports import catalog_import_file

    curator = django_user_model.objects.create_user(username="cur", password="pw-cur-123", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    dump = tmp_path / "github.jsonl"
    tool = {"server": "github-enterprise-production", "name": "list_repository_collaborators_with_permissions"}
    dump.write_text(json.dumps({**tool, "description": "List who may push."}) + "\n")
    catalog_import_file(path=dump)
    admin_login(browser, live_server.url, "cur", "pw-cur-123", path="/admin/catalog/toolrevision/")
    row = browser.find_element("css selector", "#result_list tbody tr")
    assert "p.m." not in row.text and "a.m." not in row.text and "Import from file" in row.text
    screenshot(browser, "curator-toolrevision-list")
    assert browser.execute_script(FITS), "tool revisions: the list scrolls sideways at 1280 px"


def test_the_tool_policies_show_every_column_at_800_and_1280(browser, live_server, django_user_model):
    """At 800 px beside the navigation the "held" column was past the table's edge (at 1280 px the risk class too, for
    a long tool id), and ids broke letter by letter: held now comes second, ids break at their separators."""
    from governance.models import ToolPolicy

    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    tool = ToolFactory(server=ServerFactory(slug="everything"), name="trigger-long-running-operation_with_progress")
    ToolFactory(server=ServerFactory(slug="memory"), name="open_nodes")
    ToolPolicy.objects.filter(tool=tool).update(held=True, hold_reason="changed upstream")
    admin_login(browser, live_server.url, "op", "pw-op-123")
    for width in (1280, 800):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/governance/toolpolicy/")
        assert browser.execute_script(FITS), f"the policies scroll sideways at {width} px"
        row = browser.find_element("xpath", "//table[@id='result_list']//tr[.//a[contains(., 'trigger')]]")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", row)
        screenshot(browser, f"operator-toolpolicy-list-{width}")
        for field in ("tool_column", "held_column", "risk_column", "operation_column", "by_admin"):
            cell = row.find_element("css selector", f".field-{field}")
            assert cell.is_displayed() and cell.rect["x"] + cell.rect["width"] <= width, (width, field)
        held = row.find_element("css selector", ".field-held_column .s-held")  # a badge, not a green tick
        assert held.text == "Held" and held.get_attribute("title") == "changed upstream"
        link = row.find_element("css selector", ".field-tool_column a")
        assert link.text.replace("\n", "") == "everything::trigger-long-running-operation_with_progress"


def test_the_audit_trail_shows_who_what_which_tool_and_when_at_800(browser, live_server, django_user_model):
    """At 800 px, beside the navigation and the filter, the audit trail showed its time and event, the rest scrolled
    out of view (where the dashboard's failed calls lead). The filters now go above, and tenant, approval and policy
    version give way to who, the agent and the tool (they are on each event's page)."""
    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    member = django_user_model.objects.create_user(username="alice.longname@example.com")
    acme = tenant_with("acme-corporation", member, operator)
    tool = ToolFactory(server=ServerFactory(slug="github-enterprise-production"), name="list_repository_collaborators")
    _token, raw = api_token_create(
        user=member,
        name="build machine",
        agent=agent_of(member, "release-triage-agent", tenant=acme, all_user_tools=True),
        scopes=["api", "discover", "execute"],
        expires_at=in_days(90),
    )
    audit_record(event_type="execution", principal=api_token_verify(raw), tool=tool, outcome="error")
    admin_login(browser, live_server.url, "op", "pw-op-123")
    browser.set_window_size(800, 900)
    browser.get(f"{live_server.url}/admin/governance/auditevent/?event_type__exact=execution")
    row = browser.find_element("css selector", "#result_list tbody tr")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", row)
    screenshot(browser, "operator-auditevent-list-800")
    assert browser.execute_script(FITS), "the audit trail scrolls sideways at 800 px"
    for field in ("when", "event", "subject", "tool_column"):  # the agent under its person
        cell = row.find_element("css selector", f".field-{field}")
        assert cell.is_displayed() and cell.rect["x"] + cell.rect["width"] <= 800, field
    assert row.find_element("css selector", ".field-tool_column").text.replace("\n", "") == tool.tool_id


def test_the_index_generations_show_when_each_build_started_at_1280_and_800(browser, live_server, django_user_model):
    """Nine short columns, each header on one line, pushed "Started at", the column that says which build is which,
    126 px out of the results box at 1280 px (the model key wrapped over three lines to make room)."""
    curator = django_user_model.objects.create_user(username="cur", password="pw-cur-123", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    for kind, reused in ((GenerationKind.FULL, 0), (GenerationKind.INCREMENTAL, 36)):
        IndexGeneration.objects.create(kind=kind, status=GenerationStatus.READY, model_key="all-MiniLM-L6-v2",
                                       tool_count=36, encoded=36 - reused, reused=reused)  # fmt: skip
    admin_login(browser, live_server.url, "cur", "pw-cur-123")
    for width in (1280, 800):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/search/indexgeneration/")
        screenshot(browser, f"curator-indexgeneration-{width}")
        assert len(browser.find_elements("css selector", "#result_list tbody tr")) == 2
        assert browser.execute_script(FITS), f"index generations: the list scrolls sideways at {width} px"
