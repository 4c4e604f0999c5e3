"""An operator at the home page, with an upstream that fails to sync (a real Streamable HTTP sync to a closed port):
the failing server is listed first with since when and its last error, and "Retry sync" runs the sync again and
leads to the server's page, which says how it went. On a phone the row still fits the page."""

import pytest
from django.contrib.auth.models import Group

from catalog.choices import SyncStatus, Transport
from catalog.models import Server, SyncRun
from catalog.services.sync import server_sync
from governance.roles import OPERATORS
from tests.governance.factories import ServerFactory
from tests.scoutsite.test_operator_failing_server import _closed_port

from .conftest import admin_login, click_through, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
PAGE_FITS = "return document.documentElement.scrollWidth <= document.documentElement.clientWidth;"
# The number of lines each text piece of the home's server table is laid out on, by its text.
TEXT_LINES = """const lines = {};
const walker = document.createTreeWalker(document.querySelector('#operator-home table'), NodeFilter.SHOW_TEXT);
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    const text = node.textContent.trim();
    if (!text) continue;
    const range = document.createRange();
    range.selectNodeContents(node);
    lines[text] = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size;
}
return lines;"""


def test_an_operator_sees_the_failing_server_and_retries_it_from_home(
    browser, live_server, django_user_model, loopback_upstreams
):
    from selenium.webdriver.common.by import By

    for n in range(3):
        ServerFactory(slug=f"a-{n:02d}")
    ServerFactory(slug="everything")
    server = Server.objects.create(slug="zz-payments", name="Payments", transport=Transport.HTTP,
                                   url=f"http://127.0.0.1:{_closed_port()}/mcp")  # fmt: skip
    server_sync(server_pk=server.pk)
    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))

    admin_login(browser, live_server.url, "op", "pw-op-123", path="/admin/")
    failing = browser.find_element(By.ID, "failing-zz-payments")
    assert "failing since" in failing.text and "connection refused or unreachable" in failing.text
    first_row = browser.find_element(By.CSS_SELECTOR, "#operator-home tbody tr")
    assert "zz-payments" in first_row.text  # first, before the healthy ones
    # Words stay whole beside the error: the admin's dashboard style broke them anywhere ("everythi|ng", "Tool|s").
    lines = browser.execute_script(TEXT_LINES)
    assert lines["everything"] == 1 and lines["Tools"] == 1, lines
    screenshot(browser, "operator-home-failing-server")
    browser.set_window_size(390, 900)
    screenshot(browser, "operator-home-failing-server-phone")
    assert browser.execute_script(PAGE_FITS), "the home page scrolls sideways on a phone"
    browser.set_window_size(1280, 900)

    click_through(browser, browser.find_element(By.ID, "failing-zz-payments").find_element(By.TAG_NAME, "button"))
    assert browser.current_url.endswith(f"/admin/catalog/server/{server.pk}/change/")
    assert "Sync of zz-payments failed" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist").text  # eagerly run
    screenshot(browser, "operator-retried-sync")
    assert SyncRun.objects.filter(server=server, status=SyncStatus.FAILED).count() == 2
