"""A server slug or tool name with no place to break ("financereportingwarehouseconnector") in the operator's and
curator's lists and pages, at 1280 px and at 800 px beside the navigation: one such name widened its column past the
page (at 1280 px the tool list showed the tool id and part of the title; status, changed and curated scrolled out of
view), and the tool's page scrolled sideways. Such a run now breaks anywhere; shorter parts of names stay whole. And
at 800 px the navigation takes 200 px, not Django's 275 px (which left the page 480 of 800 px)."""

import pytest
from django.contrib.auth.models import Group

from governance.roles import OPERATORS
from tests.governance.factories import ServerFactory, ToolFactory

from .conftest import admin_login, screenshot
from .test_names_whole import LINES

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

SERVER, TOOL = "financereportingwarehouseconnector", "deletestaledashboardsnapshotsolderthanretention"
NO_SIDEWAYS = """return [document.documentElement, document.querySelector('#changelist .results')]
    .every((e) => !e || e.scrollWidth <= e.clientWidth);"""


def _mid_word_breaks(browser, element) -> list[str]:
    """Where an id's text starts a new line other than after "::" or "_": "git::git_create_bran|ch"."""
    text, tops = browser.execute_script(LINES, element)
    return [
        f"{text[:i]}|{text[i:]}"
        for i in range(1, len(text))
        if None not in (tops[i], tops[i - 1]) and tops[i] > tops[i - 1] and text[i - 1] not in ":_"
    ]


def _in_view(browser, element, width: int) -> bool:
    box = browser.execute_script("const r = arguments[0].getBoundingClientRect(); return [r.left, r.right];", element)
    return element.is_displayed() and 0 <= box[0] and box[1] <= width


def test_a_long_unbroken_name_keeps_every_column_in_view_and_the_navigation_narrow(
    browser, live_server, django_user_model
):
    from selenium.webdriver.common.by import By

    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    long_tool = ToolFactory(server=ServerFactory(slug=SERVER, name=SERVER), name=TOOL)
    ToolFactory(server=ServerFactory(slug="git"), name="git_create_branch")
    admin_login(browser, live_server.url, "op", "pw-op-123")
    for width in (1280, 800):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/catalog/server/")
        screenshot(browser, f"long-name-servers-{width}")
        assert browser.execute_script(NO_SIDEWAYS), f"the server list scrolls sideways at {width} px"
        for row in browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr"):
            assert _in_view(browser, row.find_element(By.CSS_SELECTOR, ".field-last_run"), width), width
        browser.get(f"{live_server.url}/admin/catalog/tool/")
        screenshot(browser, f"long-name-tools-{width}")
        assert browser.execute_script(NO_SIDEWAYS), f"the tool list scrolls sideways at {width} px"
        for row in browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr"):
            assert _in_view(browser, row.find_element(By.CSS_SELECTOR, ".field-curated"), width), width
            cell = row.find_element(By.CSS_SELECTOR, ".field-tool_id_column")
            if "git::" in cell.text:  # a name with places to break stays whole between them
                assert not _mid_word_breaks(browser, cell), width
        browser.get(f"{live_server.url}/admin/catalog/tool/{long_tool.pk}/change/")
        assert browser.execute_script(NO_SIDEWAYS), f"the tool's page scrolls sideways at {width} px"
    # At 800 px the navigation is open and 200 px wide, leaving the page the rest.
    navigation = browser.find_element(By.ID, "nav-sidebar")
    assert navigation.is_displayed() and navigation.rect["width"] <= 201, navigation.rect
    assert browser.find_element(By.ID, "content").rect["width"] >= 520


def test_a_long_unbroken_tool_id_keeps_the_curators_unfound_tools_in_the_page(
    browser, live_server, django_user_model, member
):
    """The saved tool's page led back to "Tools agents did not find", which scrolled sideways: the long tool id under
    "Never returned" was one unbreakable word."""
    from selenium.webdriver.common.by import By

    from governance.principals import principal_for_user
    from governance.roles import CURATORS
    from search.engine.ranking import Confidence
    from search.usage import LoggedResult, query_log_record

    curator = django_user_model.objects.create_user(username="cur", password="pw-cur-123", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    ToolFactory(server=ServerFactory(slug=SERVER, name=SERVER), name=TOOL)
    returned = ToolFactory(server=ServerFactory(slug="git"), name="git_status")
    query_log_record(principal=principal_for_user(member), query="what changed", confidence=Confidence.HIGH,
                     results=[LoggedResult(tool_id=returned.tool_id, score=0.9)], degraded=False, backend="embedded",
                     latency_ms=9)  # fmt: skip
    admin_login(browser, live_server.url, "cur", "pw-cur-123")
    for width in (1280, 800):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/search/workbench/tools/")
        screenshot(browser, f"long-name-unfound-tools-{width}")
        assert f"{SERVER}::{TOOL}" in browser.find_element(By.ID, "content").text.replace("\n", "")
        assert browser.execute_script(NO_SIDEWAYS), f"the unfound tools scroll sideways at {width} px"
