"""The curator's and operator's working pages on a phone (390 px wide): the page never scrolls sideways (a wide
results table scrolls in its own box), and from a workbench row the curator reaches the tool it returned."""

import pytest

from governance.principals import principal_for_user
from search.engine.ranking import Confidence
from search.services import index_rebuild
from search.usage import LoggedResult, query_log_record
from tests.scoutsite.test_dashboard import seed_traffic

from .conftest import admin_login, click_through, screenshot, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
PAGE_FITS = "return document.documentElement.scrollWidth <= document.documentElement.clientWidth;"
REQUEST = "tell my landlord the rent is late this month"


def test_workbench_preview_and_dashboard_fit_a_phone(
    browser, live_server, django_user_model, member, small_catalog, encoder
):
    from selenium.webdriver.common.by import By

    django_user_model.objects.create_superuser(username="root", email=None, password="pw-root-123")
    index_rebuild()
    seed_traffic(member)
    query_log_record(
        principal=principal_for_user(member),
        query=REQUEST,
        results=[LoggedResult(tool_id=tool.tool_id, score=0.4) for tool in small_catalog.values()][:5],
        confidence=Confidence.LOW,
        degraded=False,
        backend="embedded",
        latency_ms=12,
    )
    admin_login(browser, live_server.url, "root", "pw-root-123")
    browser.set_window_size(390, 900)

    browser.get(f"{live_server.url}/admin/search/workbench/")
    row = browser.find_element(By.CSS_SELECTOR, f'tr.request-group[data-text="{REQUEST}"]')
    screenshot(browser, "phone-workbench")
    assert browser.execute_script(PAGE_FITS), "the workbench scrolls sideways on a phone"

    query = REQUEST.replace(" ", "+")
    browser.get(f"{live_server.url}/admin/search/preview/?query={query}&scope=every&top_k=10")
    assert browser.find_elements(By.CSS_SELECTOR, "#preview-results tr.match")
    screenshot(browser, "phone-preview")
    assert browser.execute_script(PAGE_FITS), "the search preview scrolls sideways on a phone"

    browser.get(f"{live_server.url}/admin/dashboard/?window=1h")
    wait_for(browser, "#chart-traffic")
    screenshot(browser, "phone-dashboard")
    assert browser.execute_script(PAGE_FITS), "the dashboard scrolls sideways on a phone"

    # From the request's row to a tool it returned: its page, where the curator adds an example or an alias.
    browser.get(f"{live_server.url}/admin/search/workbench/")
    row = browser.find_element(By.CSS_SELECTOR, f'tr.request-group[data-text="{REQUEST}"]')
    link = row.find_element(By.CSS_SELECTOR, "small.returned a.tool-link")
    tool_id = link.text
    click_through(browser, link)
    assert browser.find_element(By.CSS_SELECTOR, "#content h1").text == f"Curate {tool_id}"
    assert browser.find_element(By.NAME, "examples-0-text")
