"""Curator journey in a real browser: from the role's home, open a tool, read what each curation field does,
attach an example request, and see the tool found for it in the search preview (among every tool, as the curator
may discover none; then as a user sees it), with the rank score's parts and a link back to the tool."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from governance.roles import CURATORS
from search.services import index_rebuild

from .conftest import POLL, admin_login, click_through, find_now, screenshot, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
REQUEST = "let the landlord know the rent is late"


@pytest.fixture
def curator(django_user_model):
    user = django_user_model.objects.create_user(username="curator", password="pw-curator-123", is_staff=True)
    user.groups.add(Group.objects.get(name=CURATORS))
    return user


def test_curator_attaches_an_example_request_and_sees_it_in_the_preview(
    browser, live_server, curator, small_catalog, encoder, django_user_model
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from governance.services.permissions import permission_grant

    index_rebuild()
    tool = small_catalog["send_email"]
    member = django_user_model.objects.create_user(username="member")
    permission_grant(actor=curator, target=tool.server, action="discover", holder=member)
    browser.get(f"{live_server.url}/")  # the landing page: each role's way in and the MCP URL
    assert browser.find_element(By.ID, "mcp-url").text.endswith("/mcp")
    screenshot(browser, "landing")
    admin_login(browser, live_server.url, "curator", "pw-curator-123", form=True)
    home = browser.find_element(By.ID, "curator-home")
    assert "Search workbench" in home.text and "without example requests" in home.text
    screenshot(browser, "curator-home")

    click_through(browser, home.find_element(By.LINK_TEXT, tool.tool_id))  # the home has a #content-main too
    page = browser.find_element(By.ID, "content-main").text
    assert "What agents read" in page and "pushed down the ranking" in page
    assert "NEGATIVE QUERIES" in page.upper() and "QUERYS" not in page.upper()
    # The add links name the rows as written (not "Add another Alias"); the trail ends on the page's heading.
    adds = [link.text for link in browser.find_elements(By.CSS_SELECTOR, ".add-row a")]
    assert adds == [f"Add another {name}" for name in ("alias", "keyword", "example request", "negative query")]
    assert browser.find_element(By.CSS_SELECTOR, ".breadcrumbs").text.endswith(f"› Curate {tool.tool_id}")
    browser.find_element(By.NAME, "examples-0-text").send_keys(REQUEST)
    screenshot(browser, "curator-tool-page")
    click_through(browser, browser.find_element(By.NAME, "_continue"))
    message = browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text
    assert (
        message == f"Saved {tool.tool_id}: searchable with these changes now. See where its example requests rank now."
    )
    # The message's next step: the tool's example requests ranked as agents' searches, the new one among them.
    click_through(browser, browser.find_element(By.ID, "saved-preview"))
    assert REQUEST in browser.find_element(By.ID, "example-checks").text
    browser.back()

    click_through(browser, browser.find_element(By.ID, "tool-search-preview"))
    assert "/admin/search/preview/" in browser.current_url  # the tool page leads to the preview
    # ... opened for this tool: an empty request box in focus (its title was searched, which no user sends) and its
    # example requests, each a click away; the tool's row is marked in the ranking.
    query = browser.find_element(By.NAME, "query")
    assert query.get_attribute("value") == ""
    # "autofocus" is applied at a rendering update, which may come after the page's load event.
    WebDriverWait(browser, 30, POLL).until(lambda driver: driver.switch_to.active_element == query)
    assert query.get_attribute("placeholder") == f"a request a user would make for {tool.tool_id}"
    assert not find_now(browser, By.CSS_SELECTOR, ".errorlist")
    screenshot(browser, "curator-preview-for-tool")
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "#preview-tool-examples a"))
    assert browser.find_element(By.NAME, "query").get_attribute("value") == REQUEST
    assert browser.find_element(By.ID, "preview-this-tool").get_attribute("data-tool-id") == tool.tool_id
    assert browser.find_element(By.ID, "preview-tool-rank").text.startswith(f"{tool.tool_id} is at rank 1 of ")
    # The curator may discover nothing themself: the preview ranks among every tool instead, and says why (it ran
    # as them and listed nothing, an error to click past on every visit).
    assert browser.find_element(By.ID, "id_scope_1").is_selected()
    assert browser.find_element(By.ID, "preview-as").text == "Every tool some client may get"
    assert "you may discover no tool yourself" in browser.find_element(By.ID, "preview-status").text
    assert browser.find_elements(By.CSS_SELECTOR, "#preview-results tr.match")
    screenshot(browser, "curator-preview-every")

    # As a member who may discover the mail tools (a user typed in is their view, whichever scope is ticked): what
    # their MCP client gets, with why each ranks where it does.
    query = browser.find_element(By.NAME, "query")
    query.clear()
    query.send_keys(REQUEST)
    browser.find_element(By.NAME, "as_user").send_keys("member")
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "#search-preview input[type=submit]"))
    assert wait_for(browser, "#preview-as").text == "member"
    rows = browser.find_elements(By.CSS_SELECTOR, "#preview-results tr.match")
    listed = [row.get_attribute("data-tool-id") for row in rows]
    assert listed[0] == tool.tool_id and sorted(listed) == ["mail::delete_email", "mail::list_inbox", tool.tool_id]
    scores = [float(row.get_attribute("data-rank-score")) for row in rows]
    assert scores == sorted(scores, reverse=True)  # the score column follows the rank
    first = rows[0]
    parts = first.find_element(By.CSS_SELECTOR, ".score-parts").text
    assert "BM25 (words)" in parts and "Dense (meaning)" in parts
    assert f"closest: curated example request “{REQUEST}”" in parts  # the curator's example made it first
    assert f"{scores[0]:.4f}" in parts
    screenshot(browser, "curator-preview")
    click_through(browser, first.find_element(By.CSS_SELECTOR, "a.tool-link"))  # and back to the tool
    assert browser.find_element(By.NAME, "examples-0-text").get_attribute("value") == REQUEST


def test_curator_saves_a_tool_from_the_home_and_is_back_at_the_tools_still_without_examples(
    browser, live_server, curator, small_catalog, encoder
):
    """Save used to land on every tool; the curator went home again for the next one. From the home's list it
    returns to the tools still without an example request: the one just done is gone, the next is first."""
    from selenium.webdriver.common.by import By

    index_rebuild()
    admin_login(browser, live_server.url, "curator", "pw-curator-123")
    links = browser.find_elements(By.CSS_SELECTOR, "#curator-home ul a[href*='/admin/catalog/tool/']")
    first, second = links[0].text, links[1].text
    click_through(browser, links[0])
    browser.find_element(By.NAME, "examples-0-text").send_keys("what should I work on next")
    click_through(browser, browser.find_element(By.NAME, "_save"))
    assert "examples=none" in browser.current_url
    assert browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text.startswith(f"Saved {first}:")
    listed = [cell.text for cell in browser.find_elements(By.CSS_SELECTOR, "#result_list tbody th a")]
    assert first not in listed and listed[0] == second
    screenshot(browser, "curator-saved-back-to-work-list")
