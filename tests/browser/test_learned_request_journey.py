"""A curator decides what usage taught a tool from the tool's own page: its learned requests listed there, one of them
opened, promoted to a curated example request (its page had no way to decide it), and back to the tool's page, where
the next one is rejected."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Group

from governance.roles import CURATORS
from search.choices import LearnedStatus
from search.models import LearnedRequest
from tests.governance.factories import ServerFactory, ToolFactory

from .conftest import admin_login, click_through, find_now, learned_by_teachers, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_curator_promotes_and_rejects_learned_requests_from_the_tool_page(browser, live_server, django_user_model):
    from selenium.webdriver.common.by import By

    curator = django_user_model.objects.create_user(username="curator", password="pw-curator-123", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="list_inbox")
    right = learned_by_teachers(tool, "did my landlord write", 3, key="k1")
    wrong = learned_by_teachers(tool, "weather in berlin", 1, key="k2")

    admin_login(browser, live_server.url, "curator", "pw-curator-123")
    tool_page = f"{live_server.url}/admin/catalog/tool/{tool.pk}/change/"
    browser.get(tool_page)
    assert browser.find_element(By.CSS_SELECTOR, "#content h1").text == "Curate mail::list_inbox"
    # What waits is on the tool's page itself (adminux29: it was behind a bare "Learned requests" button).
    assert browser.find_element(By.ID, "tool-learned").text == "LEARNED REQUESTS (2 TO DECIDE)"
    waiting = browser.find_element(By.ID, "tool-learned-waiting")
    assert "Learned from agents' calls: 2 to decide" in waiting.text
    click_through(browser, _decide_link(browser, right.text))
    assert browser.find_element(By.CSS_SELECTOR, "#content h1").text == "Learned request for mail::list_inbox"
    screenshot(browser, "learned-request-page")
    click_through(browser, browser.find_element(By.NAME, "_promote"))

    # Back on the tool's page, told what happened, the next one waiting there; the wrong one is rejected from its page.
    assert browser.current_url.split("#")[0] == tool_page
    assert "1 promoted to example requests" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    click_through(browser, _decide_link(browser, wrong.text))
    click_through(browser, browser.find_element(By.NAME, "_reject"))
    assert "1 rejected" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    assert not find_now(browser, By.ID, "tool-learned-waiting")  # nothing waits any more
    right.refresh_from_db()
    wrong.refresh_from_db()
    assert (right.status, wrong.status) == (LearnedStatus.PROMOTED, LearnedStatus.REJECTED)
    assert list(tool.examples.values_list("text", flat=True)) == [right.text]


def _decide_link(browser, text: str):
    from selenium.webdriver.common.by import By

    rows = browser.find_elements(By.CSS_SELECTOR, "#tool-learned-waiting tr.learned-row")
    row = next(row for row in rows if row.find_element(By.TAG_NAME, "td").text == text)
    return row.find_element(By.CSS_SELECTOR, "a.learned-decide")


def test_the_home_leads_to_the_learned_requests_to_decide_and_counts_them(browser, live_server, django_user_model):
    """The curator's home had no word of learned requests: promoting one started from the app list, on every status.
    It counts those still undecided and links to them; deciding one returns to that list and lowers the count."""
    from selenium.webdriver.common.by import By

    curator = django_user_model.objects.create_user(username="curator", password="pw-curator-123", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="list_inbox")
    first = learned_by_teachers(tool, "did my landlord write", 3, key="k1")
    learned_by_teachers(tool, "weather in berlin", 1, key="k2")
    promoted = learned_by_teachers(tool, "my inbox please", 1, key="k3")
    LearnedRequest.objects.filter(pk=promoted.pk).update(status=LearnedStatus.PROMOTED)

    admin_login(browser, live_server.url, "curator", "pw-curator-123")
    assert browser.find_element(By.ID, "learned-waiting").text == "Learned requests to decide: 2"
    screenshot(browser, "curator-home-learned")
    click_through(browser, browser.find_element(By.ID, "learned-to-decide"))
    listed = [link.text for link in browser.find_elements(By.CSS_SELECTOR, "#result_list tbody th a")]
    assert sorted(listed) == ["did my landlord write", "weather in berlin"]  # the promoted one is decided
    click_through(browser, browser.find_element(By.LINK_TEXT, first.text))
    click_through(browser, browser.find_element(By.NAME, "_promote"))

    # Back on the list of those to decide (it went to every request of the tool, the one just promoted among them).
    assert "1 promoted to example requests" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text
    listed = [link.text for link in browser.find_elements(By.CSS_SELECTOR, "#result_list tbody th a")]
    assert listed == ["weather in berlin"]
    screenshot(browser, "curator-learned-decided")
    browser.get(f"{live_server.url}/admin/")
    assert browser.find_element(By.ID, "learned-waiting").text == "Learned requests to decide: 1"
