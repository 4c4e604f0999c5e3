"""Curator journey in a real browser: from the workbench to "Tools agents did not find", a tool no search returned;
give it an example request on its page, search for it in the preview and find it first."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from governance.roles import CURATORS
from search.services import index_rebuild
from tests.search.factories import logged_search

from .conftest import admin_login, click_through, find_now, screenshot, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
REQUEST = "tidy my downloads into the archive"


@pytest.fixture
def curator(django_user_model):
    user = django_user_model.objects.create_user(username="curator", password="pw-curator-123", is_staff=True)
    user.groups.add(Group.objects.get(name=CURATORS))  # the preset role: the workbench and the tools' phrases
    return user


def _preview_first(browser) -> str:
    rows = browser.find_elements("css selector", "#preview-results tr.match")
    return rows[0].get_attribute("data-tool-id") if rows else ""


def test_curator_finds_a_tool_agents_never_got_teaches_it_and_sees_it_found(
    browser, live_server, curator, member, small_catalog, encoder
):
    from selenium.webdriver.common.by import By

    index_rebuild()
    files = small_catalog
    # Agents' file requests all went to move_file's siblings: no search returned it.
    logged_search(
        member, files["list_directory"], called=files["list_directory"], query="show what is in my downloads folder"
    )
    logged_search(
        member, files["read_file"], files["write_file"], called=files["read_file"], query="open the notes file"
    )
    logged_search(member, files["write_file"], called=files["write_file"], query="save this text as todo.txt")

    admin_login(browser, live_server.url, "curator", "pw-curator-123", path="/admin/search/workbench/")
    click_through(browser, browser.find_element(By.ID, "show-unfound-tools"))
    row = browser.find_element(By.CSS_SELECTOR, '#never-returned tr.unfound-tool[data-tool-id="files::move_file"]')
    first = browser.find_element(By.CSS_SELECTOR, "#never-returned tr.unfound-tool")
    assert first.get_attribute("data-tool-id").startswith("files::")  # the searched server's tools come first
    assert "Filesystem" in row.text and "Add an example request" in row.text
    assert not find_now(browser, By.CSS_SELECTOR, '#never-returned tr[data-tool-id="files::list_directory"]')
    assert "show what is in my downloads folder" not in browser.page_source  # no one's words on this page
    screenshot(browser, "curator-unfound-tools")

    # Before: the preview does not put move_file first for the words the curator is about to teach it.
    click_through(browser, browser.find_element(By.ID, "unfound-preview"))
    browser.find_element(By.ID, "id_query").send_keys(REQUEST)
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "#search-preview input[type=submit]"))
    assert _preview_first(browser) != "files::move_file"
    browser.back()
    browser.back()

    row = browser.find_element(By.CSS_SELECTOR, '#never-returned tr.unfound-tool[data-tool-id="files::move_file"]')
    click_through(browser, row.find_element(By.CSS_SELECTOR, "a.add-example"))
    assert browser.current_url.endswith("#examples-group")
    browser.find_element(By.CSS_SELECTOR, "#examples-group input[name='examples-0-text']").send_keys(REQUEST)
    click_through(browser, browser.find_element(By.NAME, "_save"))
    # Back where they came from (the browser keeps the link's #examples-group over the redirect: no such anchor there).
    assert browser.current_url.split("#")[0] == f"{live_server.url}/admin/search/workbench/tools/"
    assert (
        "searchable with these changes now" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text
    )

    # After: its row's preview ranks it first for its example request, and so does a search in the preview.
    row = browser.find_element(By.CSS_SELECTOR, '#never-returned tr.unfound-tool[data-tool-id="files::move_file"]')
    click_through(browser, row.find_element(By.CSS_SELECTOR, "a.preview-examples"))
    check = browser.find_element(By.CSS_SELECTOR, "#example-checks tr.check")
    assert REQUEST in check.text and check.find_element(By.CSS_SELECTOR, "td.rank").text == "1"
    browser.back()
    click_through(browser, browser.find_element(By.ID, "unfound-preview"))
    browser.find_element(By.ID, "id_query").send_keys(REQUEST)
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "#search-preview input[type=submit]"))
    assert wait_for(browser, "#preview-as").text == "Every tool some client may get"
    assert _preview_first(browser) == "files::move_file"
    assert "example request" in browser.find_element(By.CSS_SELECTOR, "#preview-results tr.match").text
    screenshot(browser, "curator-unfound-tools-found")
