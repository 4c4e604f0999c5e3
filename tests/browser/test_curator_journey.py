"""Curator journey in a real browser: from the role's home, open a tool, read what each curation field does,
attach an example request, and see the tool found for it in the search preview, with a link back to the tool."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from governance.roles import CURATORS
from search.services import index_rebuild

from .conftest import admin_login, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
REQUEST = "let the landlord know the rent is late"


@pytest.fixture
def curator(django_user_model):
    user = django_user_model.objects.create_user(username="curator", password="pw-curator-123", is_staff=True)
    user.groups.add(Group.objects.get(name=CURATORS))
    return user


def test_curator_attaches_an_example_request_and_sees_it_in_the_preview(
    browser, live_server, curator, small_catalog, encoder
):
    from selenium.webdriver.common.by import By

    index_rebuild()
    tool = small_catalog["send_email"]
    browser.get(f"{live_server.url}/")  # the landing page: each role's way in and the MCP URL
    assert browser.find_element(By.ID, "mcp-url").text.endswith("/mcp")
    screenshot(browser, "landing")
    admin_login(browser, live_server.url, "curator", "pw-curator-123")
    home = browser.find_element(By.ID, "curator-home")
    assert "Search workbench" in home.text and "without example requests" in home.text
    screenshot(browser, "curator-home")

    home.find_element(By.LINK_TEXT, tool.tool_id).click()
    page = browser.find_element(By.ID, "content-main").text
    assert "What agents read" in page and "pushed down the ranking" in page
    assert "NEGATIVE QUERIES" in page.upper() and "QUERYS" not in page.upper()
    browser.find_element(By.NAME, "examples-0-text").send_keys(REQUEST)
    screenshot(browser, "curator-tool-page")
    browser.find_element(By.NAME, "_continue").click()
    message = browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text
    assert message == f"Saved {tool.tool_id}: searchable with these changes now."

    browser.find_element(By.CSS_SELECTOR, ".object-tools a[href^='/admin/search/preview/?']").click()
    assert "/admin/search/preview/" in browser.current_url  # the tool page leads to the preview
    browser.get(f"{live_server.url}/admin/search/preview/?query={REQUEST.replace(' ', '+')}&top_k=5")
    first = browser.find_element(By.CSS_SELECTOR, "#preview-results tr.match")
    assert first.get_attribute("data-tool-id") == tool.tool_id
    assert "example request" in first.text
    screenshot(browser, "curator-preview")
    first.find_element(By.CSS_SELECTOR, "a.tool-link").click()  # and back to the tool
    assert browser.find_element(By.NAME, "examples-0-text").get_attribute("value") == REQUEST
