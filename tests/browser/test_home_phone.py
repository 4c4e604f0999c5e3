"""The home page on a phone (390 px wide): each role's panel stacks in one column and the page never scrolls
sideways; the operator's server table scrolls in its own box if it must."""

import pytest
from django.contrib.auth.models import Group

from governance.principals import principal_for_user
from governance.roles import APPROVERS, CURATORS, OPERATORS
from governance.services.approvals import approval_request_create
from governance.services.permissions import permission_grant
from tests.governance.factories import ServerFactory, ToolFactory

from .conftest import admin_login, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
PAGE_FITS = "return document.documentElement.scrollWidth <= document.documentElement.clientWidth;"


def test_home_on_a_phone(browser, live_server, django_user_model, superuser, member):
    from selenium.webdriver.common.by import By

    person = django_user_model.objects.create_user(username="all-roles", password="pw-all-123", is_staff=True)
    person.groups.add(*Group.objects.filter(name__in=[CURATORS, APPROVERS, OPERATORS]))
    server = ServerFactory(slug="github-enterprise-production-eu-west")
    tool = ToolFactory(server=server, name="delete_repository_with_all_its_branches", annotations=None)
    for action in ("discover", "execute"):
        permission_grant(actor=superuser, target=server, action=action, holder=member)
    permission_grant(actor=superuser, target=server, action="approve", holder=person)
    approval_request_create(principal=principal_for_user(member), tool=tool, arguments={"name": "repo"})

    admin_login(browser, live_server.url, "all-roles", "pw-all-123")
    browser.set_window_size(390, 900)
    browser.get(f"{live_server.url}/admin/")
    panels = [browser.find_element(By.ID, name) for name in ("approver-home", "curator-home", "operator-home")]
    screenshot(browser, "phone-home")
    assert browser.execute_script(PAGE_FITS), "the home page scrolls sideways on a phone"
    lefts = {round(panel.rect["x"]) for panel in panels}
    assert len(lefts) == 1, "the panels stack in one column"
    for panel in panels:
        assert panel.rect["x"] >= 0 and panel.rect["x"] + panel.rect["width"] <= 390, panel.get_attribute("id")
    # Each table row stacks too: a cell is a line as wide as the panel, never a column a few letters wide.
    cells = browser.find_elements(By.CSS_SELECTOR, "#approver-home .scout-table td[data-label]")
    assert len(cells) >= 4 and min(cell.rect["width"] for cell in cells) > 250
    asked_by = next(cell for cell in cells if cell.get_attribute("data-label") == "Asked by")
    assert asked_by.text == "member"
    browser.execute_script("arguments[0].scrollIntoView();", panels[2])
    screenshot(browser, "phone-home-operator")
    # A server on one line (name, health, tools, last sync side by side), not four labelled lines: 30 servers made a
    # 4,900 px home. Its name, even this long, and health stay readable.
    [row] = browser.find_elements(By.CSS_SELECTOR, "#operator-home .scout-table tbody tr")
    line = browser.find_element(By.CSS_SELECTOR, "#operator-home .scout-table td[data-label=Health]").rect["height"]
    assert row.rect["height"] < 3 * line, (row.rect["height"], line)
    assert row.text.startswith("github-enterprise-production-eu-west Active 1 live")


# The element at the centre of arguments[0] (scrolled into view) is it or inside it: nothing is painted over it.
ON_TOP = """arguments[0].scrollIntoView({block: 'center'}); const r = arguments[0].getBoundingClientRect();
return arguments[0].contains(document.elementFromPoint(r.left + r.width / 2, r.top + r.height / 2));"""
TOOL_LINES = """const cell = arguments[0], range = document.createRange();
range.setStartBefore(cell.firstChild); range.setEndBefore(cell.querySelector('br'));
return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;"""


def test_the_approvers_home_keeps_each_call_inside_its_panel_at_1280_and_800(
    browser, live_server, django_user_model, superuser
):
    """The home's work column was Django's 600 px whatever the window: at 1280 px a tool id broke mid-name
    ("memory::create_|relations") with half the screen empty, and at 800 px, beside "Your recent actions", the
    waiting calls' table ran out of its panel, Decide past the panel's edge."""
    from selenium.webdriver.common.by import By

    person = django_user_model.objects.create_user(username="asker", email="asker@example.com")
    approver = django_user_model.objects.create_user(username="appr", password="pw-appr-123", is_staff=True)
    approver.groups.add(Group.objects.get(name=APPROVERS))
    server = ServerFactory(slug="memory")
    for name in ("create_relations", "add_observations"):
        tool = ToolFactory(server=server, name=name, annotations=None)
        arguments = {"message": "change number 1 with a fairly long message to see wrapping", "repo_path": "/tmp/x"}
        approval_request_create(principal=principal_for_user(person), tool=tool, arguments=arguments)
    for holder, action in ((person, "discover"), (person, "execute"), (approver, "approve")):
        permission_grant(actor=superuser, target=server, action=action, holder=holder)
    admin_login(browser, live_server.url, "appr", "pw-appr-123")
    for width in (1280, 800):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/")
        screenshot(browser, f"approver-home-{width}")
        panel = browser.find_element(By.ID, "approver-home")
        right = panel.rect["x"] + panel.rect["width"]
        table = panel.find_element(By.CSS_SELECTOR, ".scout-table")
        assert table.rect["x"] + table.rect["width"] <= right, f"the table runs out of its panel at {width} px"
        rows = panel.find_elements(By.CSS_SELECTOR, ".scout-table tbody tr")
        assert len(rows) == 2
        for row in rows:
            decide = row.find_element(By.LINK_TEXT, "Decide")
            assert decide.rect["x"] + decide.rect["width"] <= right, f"Decide outside the panel at {width} px"
            assert browser.execute_script(ON_TOP, decide), f"Decide is covered at {width} px"
            tool = row.find_element(By.CSS_SELECTOR, "td[data-label=Tool]")
            assert browser.execute_script(TOOL_LINES, tool) == 1, f"{tool.text!r} over two lines at {width} px"
