"""Curator journey in a real browser: find a withheld request (asked in three wordings, one group) in the
workbench, attach it to a tool, see the tool found for it and for its paraphrases in the search preview; dismiss a
request no tool should serve, see the home's count drop, restore it."""

from __future__ import annotations

import pytest
from django.contrib.auth.models import Permission
from django.utils.http import urlencode

from governance.principals import principal_for_user
from search.engine.ranking import Confidence
from search.services import index_rebuild
from search.usage import query_log_record

from .conftest import admin_login, click_through, find_now, screenshot, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
WITHHELD = "ping my landlord about the rent"
# The same request as agents also worded it (issue 8: each was its own group, the same work three times).
PARAPHRASES = ("Pinging my landlord about rent", "ping my landlord about the rent, please")
LINES_OF_TEXT = """const range = document.createRange(); range.selectNodeContents(arguments[0]);
return new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size;"""


@pytest.fixture
def curator(django_user_model):
    user = django_user_model.objects.create_user(username="curator", password="pw-curator-123", is_staff=True)
    for app, codename in (("catalog", "view_tool"), ("catalog", "change_tool"), ("search", "view_querylogentry")):
        user.user_permissions.add(Permission.objects.get(codename=codename, content_type__app_label=app))
    return user


def _withheld(member, query: str, returned=()) -> None:
    """A request of ``member``'s that the gateway withheld, in the query log."""
    query_log_record(
        principal=principal_for_user(member),
        query=query,
        results=list(returned),
        confidence=Confidence.NONE,
        degraded=False,
        backend="embedded",
        latency_ms=9,
    )


def test_curator_attaches_a_withheld_request_and_sees_it_found(
    browser, live_server, curator, member, small_catalog, encoder
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    index_rebuild()
    for query in (*PARAPHRASES, WITHHELD):
        _withheld(member, query)
    admin_login(browser, live_server.url, "curator", "pw-curator-123")
    assert browser.find_element(By.ID, "workbench-waiting").text.endswith(": 1")  # one piece of work, not three
    browser.get(f"{live_server.url}/admin/search/workbench/?reason=withheld")
    [row] = browser.find_elements(By.CSS_SELECTOR, "tr.request-group")
    assert row.get_attribute("data-text") == WITHHELD and "withheld ×3" in row.text
    shown = [item.get_attribute("data-text") for item in row.find_elements(By.CSS_SELECTOR, "li.wording")]
    assert sorted(shown) == sorted([WITHHELD, *PARAPHRASES])
    assert all(item.text.endswith("×1") and item.is_displayed() for item in row.find_elements(By.CSS_SELECTOR, "li"))
    screenshot(browser, "curator-workbench")

    row.find_element(By.NAME, "tool_id").send_keys("mail::send_email")
    Select(row.find_element(By.NAME, "kind")).select_by_value("example")
    click_through(browser, row.find_element(By.CSS_SELECTOR, "button[type=submit]"))
    message = browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text
    assert "mail::send_email" in message and "searchable now" in message
    assert not find_now(browser, By.CSS_SELECTOR, "tr.request-group")  # handled, with its paraphrases
    assert browser.find_element(By.ID, "workbench-empty")
    screenshot(browser, "curator-workbench-attached")

    # The message leads to the fix at work: the request in the preview, among every tool, the tool first.
    click_through(browser, browser.find_element(By.ID, "attached-preview"))
    assert browser.find_element(By.ID, "id_query").get_attribute("value") == WITHHELD
    assert wait_for(browser, "#preview-as").text == "Every tool some client may get"
    first = browser.find_element(By.CSS_SELECTOR, "#preview-results tr.match")
    assert first.get_attribute("data-tool-id") == "mail::send_email" and "example request" in first.text
    # ... said in words, the tool's row marked, and the request among the tool's examples: the preview opened for it.
    assert browser.find_element(By.ID, "preview-tool-rank").text.startswith("mail::send_email is at rank 1 of ")
    assert first.get_attribute("id") == "preview-this-tool"
    assert WITHHELD in browser.find_element(By.ID, "preview-tool-examples").text
    screenshot(browser, "curator-workbench-checked")
    # Found in the other wordings too, which the curator attached nothing for.
    for query in PARAPHRASES:
        asked = urlencode({"query": query, "top_k": 10, "scope": "every"})
        browser.get(f"{live_server.url}/admin/search/preview/?{asked}")
        first = browser.find_element(By.CSS_SELECTOR, "#preview-results tr.match")
        assert first.get_attribute("data-tool-id") == "mail::send_email", query

    # This curator may not pick a user: the preview as themself (asked for) lists nothing, as they may discover
    # no tool, and says so; the explicit "every tool some client may get" ranks the catalog.
    browser.get(f"{live_server.url}/admin/search/preview/?query={WITHHELD.replace(' ', '+')}&top_k=10&scope=user")
    assert "You may discover no tool" in browser.find_element(By.ID, "preview-empty-self").text
    browser.find_element(By.ID, "id_scope_1").click()
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "#search-preview input[type=submit]"))
    assert wait_for(browser, "#preview-as").text == "Every tool some client may get"
    first = browser.find_element(By.CSS_SELECTOR, "#preview-results tr.match")
    assert first.get_attribute("data-tool-id") == "mail::send_email"
    assert "example request" in first.text
    screenshot(browser, "curator-preview-after")


def test_curator_dismisses_a_request_no_tool_should_serve_and_restores_it(browser, live_server, curator, member):
    """Booking a flight in a catalog with no travel tool: the curator dismisses it, the home's count drops and the
    row is gone; the dismissed list shows it, and "Restore" brings it back."""
    from selenium.webdriver.common.by import By

    flight = "book a flight to Lisbon"
    for query in (flight, WITHHELD):
        _withheld(member, query)
    admin_login(browser, live_server.url, "curator", "pw-curator-123")
    assert browser.find_element(By.ID, "workbench-waiting").text.endswith(": 2")

    browser.get(f"{live_server.url}/admin/search/workbench/?reason=withheld")
    row = browser.find_element(By.CSS_SELECTOR, f'tr.request-group[data-text="{flight}"]')
    button = row.find_element(By.CSS_SELECTOR, "form.dismiss button")
    assert button.text == "No tool should serve this"
    screenshot(browser, "curator-workbench-dismiss")
    click_through(browser, button)
    message = browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text
    assert message.startswith(f"Dismissed “{flight}”: no tool should serve it.")
    assert browser.current_url.endswith("?reason=withheld")  # back to the list the curator was working through
    assert not find_now(browser, By.CSS_SELECTOR, f'tr.request-group[data-text="{flight}"]')
    assert browser.find_elements(By.CSS_SELECTOR, f'tr.request-group[data-text="{WITHHELD}"]')

    browser.get(f"{live_server.url}/admin/")
    assert browser.find_element(By.ID, "workbench-waiting").text.endswith(": 1")

    browser.get(f"{live_server.url}/admin/search/workbench/")
    click_through(browser, browser.find_element(By.ID, "show-dismissed"))
    dismissed = browser.find_element(By.CSS_SELECTOR, f'tr.dismissed-request[data-text="{flight}"]')
    assert "curator" in dismissed.text
    screenshot(browser, "curator-workbench-dismissed")
    click_through(browser, dismissed.find_element(By.CSS_SELECTOR, "form.restore button"))
    assert browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text.startswith(f"Restored “{flight}”")
    assert browser.find_element(By.ID, "dismissed-empty")

    browser.get(f"{live_server.url}/admin/")
    assert browser.find_element(By.ID, "workbench-waiting").text.endswith(": 2")
    browser.get(f"{live_server.url}/admin/search/workbench/")
    assert browser.find_elements(By.CSS_SELECTOR, f'tr.request-group[data-text="{flight}"]')


def test_a_long_request_reads_in_a_few_lines_beside_the_tools_it_returned(browser, live_server, curator, member):
    # The tools a request returned took the row's width: a request of a sentence stood in a sliver, a word a line.
    from selenium.webdriver.common.by import By

    from search.usage import LoggedResult

    request = "find last quarter's revenue report for the EMEA region and email the summary to the finance team"
    returned = [LoggedResult(tool_id=f"reports-{n}::export_quarterly_revenue_{n}", score=0.3) for n in range(8)]
    _withheld(member, request, returned)
    admin_login(browser, live_server.url, "curator", "pw-curator-123", path="/admin/search/workbench/")
    text = browser.find_element(By.CSS_SELECTOR, "tr.request-group td strong")
    screenshot(browser, "curator-workbench-long-request")
    lines = browser.execute_script(
        "const e = arguments[0]; return e.getBoundingClientRect().height / parseFloat(getComputedStyle(e).lineHeight);",
        text,
    )
    assert lines < 4, lines  # 5 lines at 1280 px before, 7 at a year's volume (longer returned tool ids)
    # When it was last asked reads on one line (adminux29: "2026-12-" over "07 10:32" beside such a row).
    latest = browser.find_element(By.CSS_SELECTOR, "tr.request-group td.latest")
    assert browser.execute_script(LINES_OF_TEXT, latest) == 1
    assert browser.execute_script("return document.documentElement.scrollWidth <= document.documentElement.clientWidth")


def test_curator_attaches_a_request_the_agent_rephrased_twice_to_the_tool_it_then_called(
    browser, live_server, curator, member
):
    """The demo's agent asked "keep in mind…" and "remember…" (low confidence both), then "store a note about a
    person", and called memory::create_entities (waiting for approval). The first request's row said nothing of that
    call (only the next search's call counted): it now names it, and one click attaches the request to it. A call of a
    tool a low-confidence request did not return is another task's, and no longer offered for it."""
    from selenium.webdriver.common.by import By

    from catalog.models import ToolExample
    from search.usage import LoggedResult, search_outcome_record
    from tests.governance.factories import ServerFactory, ToolFactory

    remember = ToolFactory(server=ServerFactory(slug="memory"), name="create_entities")
    first = "keep in mind that Dana drinks green tea"
    for query, confidence in ((first, Confidence.LOW), ("remember that Dana likes green tea", Confidence.LOW),
                              ("store a note about a person", Confidence.HIGH)):  # fmt: skip
        query_log_record(
            principal=principal_for_user(member), query=query, confidence=confidence, degraded=False,
            results=[LoggedResult(tool_id=remember.tool_id, score=0.4)], backend="embedded", latency_ms=9,
        )  # fmt: skip
    search_outcome_record(principal=principal_for_user(member), tool=remember, outcome="pending_approval")
    # Then another task: a low-confidence "book a flight" (memory tools), the latest commits and a git_log call.
    git_log = ToolFactory(server=ServerFactory(slug="git"), name="git_log")
    for query, confidence, tool in (("book a flight to Lisbon", Confidence.LOW, remember),
                                    ("show the latest commits", Confidence.HIGH, git_log)):  # fmt: skip
        query_log_record(
            principal=principal_for_user(member), query=query, confidence=confidence, degraded=False,
            results=[LoggedResult(tool_id=tool.tool_id, score=0.4)], backend="embedded", latency_ms=9,
        )  # fmt: skip
    search_outcome_record(principal=principal_for_user(member), tool=git_log, outcome="success")
    admin_login(browser, live_server.url, "curator", "pw-curator-123", path="/admin/search/workbench/?reason=low")
    flight = browser.find_element(By.CSS_SELECTOR, 'tr.request-group[data-text="book a flight to Lisbon"]')
    assert not find_now(browser, By.CSS_SELECTOR, ".called", within=flight)  # it offered "Attach to git::git_log"
    row = browser.find_element(By.CSS_SELECTOR, f'tr.request-group[data-text="{first}"]')
    called = row.find_element(By.CSS_SELECTOR, ".called-tool")
    assert called.get_attribute("data-tool") == "memory::create_entities"
    assert "waiting for approval ×1" in called.text and "after searching “store a note about a person”" in called.text
    screenshot(browser, "curator-workbench-rephrased-twice")
    click_through(browser, called.find_element(By.CSS_SELECTOR, "form.attach-called button"))
    assert "memory::create_entities" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text
    assert list(ToolExample.objects.filter(tool=remember).values_list("text", flat=True)) == [first]
