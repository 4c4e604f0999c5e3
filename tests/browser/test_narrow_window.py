"""The approver's inbox and the curator's workbench in an 800 px window with the navigation sidebar open (a laptop
split screen): every request's call and its Decide, and every request's Attach, in view; nothing scrolls sideways.
Beside both sidebars the inbox showed only ids and Decide, and the workbench pushed its Attach column off the page."""

import re

import pytest
from django.contrib.auth.models import Group

from governance.principals import principal_for_user
from governance.roles import CURATORS, OPERATORS
from governance.services.permissions import permission_grant
from governance.services.tokens import api_token_create
from search.engine.ranking import Confidence
from search.usage import LoggedResult, query_log_record
from tests.governance.factories import ServerFactory, agent_of, in_days

from .conftest import admin_login, approver_and_tool, find_now, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
NO_SIDEWAYS = "return document.documentElement.scrollWidth <= document.documentElement.clientWidth;"


def _in_view(browser, element) -> bool:
    width = browser.execute_script("return document.documentElement.clientWidth")
    box = browser.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.right];", element)
    return element.is_displayed() and 0 <= box[0] and box[1] <= width


def _open_at_800(browser, live_server, login: tuple[str, str], path: str, *, navigation: bool = True) -> None:
    """``path`` in an 800 px window, logged in as ``login``, the navigation sidebar open beside the page (the
    approval inbox has none: ``navigation=False``)."""
    from selenium.webdriver.common.by import By

    browser.set_window_size(800, 900)
    admin_login(browser, live_server.url, *login, path=f"{path}")
    if navigation:
        assert browser.find_element(By.ID, "nav-sidebar").is_displayed()
    else:
        assert not find_now(browser, By.ID, "nav-sidebar")


def test_the_approval_inbox_shows_each_call_at_800_px(browser, live_server, django_user_model, member):
    from selenium.webdriver.common.by import By

    from governance.services.approvals import approval_request_create

    server, name = "github-enterprise-production", "create_branch_from_release_tag"
    tool = approver_and_tool(django_user_model, member, server=server, tool=name)
    for n in range(3):
        arguments = {"repository": "payments-service", "branch": f"hotfix-{n}"}
        approval_request_create(principal=principal_for_user(member), tool=tool, arguments=arguments)
    _open_at_800(browser, live_server, ("appr", "pw-appr-123"), "/admin/governance/approvalrequest/", navigation=False)
    screenshot(browser, "approver-inbox-800")
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(rows) == 3 and browser.execute_script(NO_SIDEWAYS), "the inbox scrolls sideways at 800 px"
    for row in rows:
        # Each card leads with what is asked, not the request's opaque id (last, under who asked and when).
        assert row.text.startswith(f"{server}::{name}"), row.text
        assert re.search(r"member\s+\d{4}-\d\d-\d\d \d\d:\d\d\s+apr_\S+$", row.text), row.text
        call = row.find_element(By.CSS_SELECTOR, ".field-tool_column")
        assert _in_view(browser, call) and 'branch: "hotfix-' in call.text
        assert _in_view(browser, row.find_element(By.LINK_TEXT, "Decide"))
        assert _in_view(browser, row.find_element(By.CSS_SELECTOR, ".field-status_column .expires"))


def test_the_workbench_keeps_attach_in_view_at_800_px(browser, live_server, django_user_model, member):
    from selenium.webdriver.common.by import By

    curator = django_user_model.objects.create_user(username="cur", password="pw-cur-123", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    returned = [LoggedResult(tool_id=f"reports::export_quarterly_revenue_{n}", score=0.3) for n in range(4)]
    for query in ("which env vars are set on the build machine", "make the server sleep for a while"):
        query_log_record(principal=principal_for_user(member), query=query, results=returned,
                         confidence=Confidence.LOW, degraded=False, backend="embedded", latency_ms=9)  # fmt: skip
    _open_at_800(browser, live_server, ("cur", "pw-cur-123"), "/admin/search/workbench/")
    screenshot(browser, "curator-workbench-800")
    rows = browser.find_elements(By.CSS_SELECTOR, "tr.request-group")
    assert len(rows) == 2 and browser.execute_script(NO_SIDEWAYS), "the workbench scrolls sideways at 800 px"
    for row in rows:
        for name in ("tool_id", "kind"):
            assert _in_view(browser, row.find_element(By.NAME, name)), name
        assert _in_view(browser, row.find_element(By.CSS_SELECTOR, "form.attach button"))


def test_the_tool_list_puts_its_filters_above_and_scrolls_only_its_table_at_800_px(
    browser, live_server, django_user_model
):
    from selenium.webdriver.common.by import By

    from tests.governance.factories import ServerFactory, ToolFactory

    curator = django_user_model.objects.create_user(username="cur", password="pw-cur-123", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    server = ServerFactory(slug="github-enterprise-production")
    for name in ("list_repository_collaborators_with_permissions", "create_branch_from_release_tag"):
        ToolFactory(server=server, name=name)
    _open_at_800(browser, live_server, ("cur", "pw-cur-123"), "/admin/catalog/tool/")
    screenshot(browser, "curator-tools-800")
    assert browser.execute_script(NO_SIDEWAYS), "the tool list scrolls the page sideways at 800 px"
    filters = browser.find_element(By.ID, "changelist-filter")
    first = browser.find_element(By.CSS_SELECTOR, "#result_list tbody tr th a")
    assert filters.rect["y"] + filters.rect["height"] <= first.rect["y"]  # above the rows, not beside them
    assert _in_view(browser, first)
    # ... and whether each tool is live and curated, the column a curator scans, in view: the list left 446 px to six
    # columns and scrolled those out of view (the server, the id's first part, and the last change are left out).
    results = browser.find_element(By.CSS_SELECTOR, "#changelist .results")
    assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth;", results)
    for row in browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr"):
        for cell in (".field-tool_id_column", ".field-status_badge", ".field-curated"):
            assert _in_view(browser, row.find_element(By.CSS_SELECTOR, cell)), cell


def test_the_server_page_shows_its_last_sync_runs_whole_at_800_px(browser, live_server, django_user_model):
    """The operator's server page: each of the last runs, when it started, how it ended and what it did to tools,
    in view. Nine columns (five of them counts) cut the table after "unchanged" and scrolled it in its box."""
    from datetime import timedelta

    from django.utils import timezone
    from selenium.webdriver.common.by import By

    from catalog.choices import SyncKind, SyncStatus
    from catalog.models import SyncRun
    from governance.roles import OPERATORS
    from tests.governance.factories import ServerFactory

    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    server = ServerFactory(slug="github-enterprise-production")
    for n in range(3):
        started = timezone.now() - timedelta(hours=n)
        SyncRun.objects.create(server=server, kind=SyncKind.SYNC, status=SyncStatus.SUCCESS, source="beat",
                               started_at=started, added=n, unchanged=40, removed=1)  # fmt: skip
    _open_at_800(browser, live_server, ("op", "pw-op-123"), f"/admin/catalog/server/{server.pk}/change/")
    runs = browser.find_element(By.ID, "sync_runs-group")
    browser.execute_script("arguments[0].scrollIntoView();", runs)
    screenshot(browser, "operator-server-runs-800")
    table = runs.find_element(By.TAG_NAME, "table")
    assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth;", runs)
    rows = table.find_elements(By.CSS_SELECTOR, "tbody tr.has_original")
    assert len(rows) == 3
    for row in rows:
        for cell in (".field-run_link a", ".field-status_badge", ".field-tool_counts"):
            assert _in_view(browser, row.find_element(By.CSS_SELECTOR, cell)), cell
    assert [row.find_element(By.CSS_SELECTOR, ".field-tool_counts").text for row in rows] == [
        "1 removed · 40 unchanged",
        "1 added · 1 removed · 40 unchanged",
        "2 added · 1 removed · 40 unchanged",
    ]


def test_the_search_preview_keeps_each_score_in_view_at_800_px(
    browser, live_server, django_user_model, small_catalog, encoder
):
    """The curator's search preview beside the navigation at 800 px: each result's tool, rank score, why it matched
    and the link to its example requests in view. Seven columns scrolled the table in its box, its scroll bar a
    screen below, the score's parts and why it matched out of view."""
    from selenium.webdriver.common.by import By

    from search.services import index_rebuild

    curator = django_user_model.objects.create_user(username="cur", password="pw-cur-123", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    index_rebuild()
    _open_at_800(
        browser,
        live_server,
        ("cur", "pw-cur-123"),
        "/admin/search/preview/?query=tell+my+landlord+the+rent+is+late&scope=every&top_k=5",
    )
    screenshot(browser, "curator-preview-800")
    box = browser.find_element(By.CSS_SELECTOR, ".scout-scroll")
    assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth;", box)
    rows = browser.find_elements(By.CSS_SELECTOR, "#preview-results tr.match")
    assert rows
    for row in rows:
        for cell in (".tool-link", ".rank-score", ".fit", ".why", ".examples-link", ".retriever-ranks"):
            assert _in_view(browser, row.find_element(By.CSS_SELECTOR, cell)), cell


def test_the_server_pages_access_sections_fit_at_800_px(browser, live_server, django_user_model):
    """Who may use a server, on its page at 800 px: each grant's Delete? box and the new row's group or person and
    what they may do, in view. Django's 20em box for the group or person pushed Delete? out of the table."""
    from selenium.webdriver.common.by import By

    from governance.roles import OPERATORS
    from governance.services.permissions import permission_grant
    from tests.governance.factories import GroupFactory, ServerFactory

    root = django_user_model.objects.create_superuser(username="root", email=None, password="pw-root-123")
    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    server = ServerFactory(slug="github-enterprise-production")
    permission_grant(actor=root, target=server, action="discover", holder=GroupFactory(name="release engineers"))
    permission_grant(actor=root, target=server, action="execute", holder=operator)
    _open_at_800(browser, live_server, ("op", "pw-op-123"), f"/admin/catalog/server/{server.pk}/change/")
    for section in ("group_grants-group", "user_grants-group"):
        box = browser.find_element(By.ID, section)
        browser.execute_script("arguments[0].scrollIntoView();", box)
        screenshot(browser, f"operator-server-{section}-800")
        assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth;", box), section
        saved = box.find_element(By.CSS_SELECTOR, "tr.has_original")
        assert _in_view(browser, saved.find_element(By.CSS_SELECTOR, "td.delete input[type=checkbox]")), section
        new = box.find_element(By.CSS_SELECTOR, "tr.form-row:not(.has_original):not(.empty-form)")
        for cell in (".select2-container", "select[name$=permission]"):
            assert _in_view(browser, new.find_element(By.CSS_SELECTOR, cell)), (section, cell)


OPERATOR_LISTS = (
    "governance/apitoken",
    "governance/agent",
    "governance/serveruserobjectpermission",
    "governance/servergroupobjectpermission",
    "governance/riskclass",
    "auth/user",
)


def test_the_operators_lists_put_their_filters_above_and_fit_at_800_px(browser, live_server, django_user_model):
    """Every list an operator opens from the navigation, not only those marked for it: beside the navigation and the
    filter column a list had 290 px, so the token list showed its name and user ("ad|min") and scrolled the rest,
    the action menu ran under the filter, and the people, agents, grants and risk classes scrolled sideways too."""
    from selenium.webdriver.common.by import By

    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    member = django_user_model.objects.create_user(username="alice.longname", email="alice.longname@example.com")
    server = ServerFactory(slug="github-enterprise-production")
    api_token_create(
        user=member,
        name="claude code on the build machine",
        agent=agent_of(member, "release-triage-agent", all_user_tools=True),
        scopes=["api", "discover", "execute"],
        expires_at=in_days(90),
    )
    permission_grant(actor=operator, target=server, action="approve", holder=member)
    permission_grant(actor=operator, target=server, action="discover", holder=Group.objects.get(name=OPERATORS))
    _open_at_800(browser, live_server, ("op", "pw-op-123"), f"/admin/{OPERATOR_LISTS[0]}/")
    for page in OPERATOR_LISTS:
        browser.get(f"{live_server.url}/admin/{page}/")
        screenshot(browser, f"operator-{page.split('/')[1]}-800")
        first = browser.find_element(By.CSS_SELECTOR, "#result_list tbody tr")
        for filters in find_now(browser, By.ID, "changelist-filter"):  # (the agents have none)
            assert filters.rect["y"] + filters.rect["height"] <= first.rect["y"], f"{page}: the filters beside the rows"
        results = browser.find_element(By.CSS_SELECTOR, "#changelist .results")
        scrolls = browser.execute_script("return arguments[0].scrollWidth - arguments[0].clientWidth;", results)
        assert scrolls <= 0 and browser.execute_script(NO_SIDEWAYS), f"{page}: the list scrolls {scrolls} px sideways"
