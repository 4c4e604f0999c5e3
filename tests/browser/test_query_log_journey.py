"""A curator reads one logged search in a real browser: the tools it returned, best first, what followed each
(called and how it ended, or not called), and from a returned tool its page."""

import pytest
from django.contrib.auth.models import Group

from governance.principals import principal_for_user
from governance.roles import CURATORS
from governance.services.permissions import permission_grant
from search.choices import SearchOutcomeKind
from search.usage import LoggedResult, query_log_record, search_outcome_record
from tests.governance.factories import ServerFactory, ToolFactory

from .conftest import admin_login, click_through, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
REQUEST = "email the quarterly report to finance"


def test_query_log_journey(browser, live_server, django_user_model, superuser, member):
    from selenium.webdriver.common.by import By

    curator = django_user_model.objects.create_user(username="cur", password="pw-cur-123", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    server = ServerFactory(slug="mail")
    send, draft = (ToolFactory(server=server, name=name) for name in ("send_email", "draft_email"))
    for action in ("discover", "execute"):
        permission_grant(actor=superuser, target=server, action=action, holder=member)
    principal = principal_for_user(member)
    results = [LoggedResult(tool_id=send.tool_id, score=0.81), LoggedResult(tool_id=draft.tool_id, score=0.42)]
    entry = query_log_record(principal=principal, query=REQUEST, results=results, confidence="high",
                             degraded=False, backend="embedded", latency_ms=9)  # fmt: skip
    assert search_outcome_record(principal=principal, tool=send, outcome=SearchOutcomeKind.SUCCESS) is not None

    admin_login(browser, live_server.url, "cur", "pw-cur-123", path="/admin/search/querylogentry/")
    row = next(row for row in browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr") if REQUEST in row.text)
    click_through(browser, row.find_element(By.CSS_SELECTOR, "th a, td a"))
    assert f"/admin/search/querylogentry/{entry.pk}/change/" in browser.current_url
    ranked = [
        [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        for row in browser.find_elements(By.CSS_SELECTOR, "#ranked-tools tr.ranked-tool")
    ]
    screenshot(browser, "query-log-entry")
    assert ranked == [
        ["1", "mail::send_email", "0.810", "called: Succeeded"],
        ["2", "mail::draft_email", "0.420", "not called"],
    ]
    click_through(browser, browser.find_element(By.LINK_TEXT, "mail::draft_email"))
    assert browser.find_element(By.CSS_SELECTOR, "#content h1").text == "Curate mail::draft_email"
