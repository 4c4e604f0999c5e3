"""Test connection's page says the step after it that fits where the operator is: for a new server, test again and
save (saving a new server syncs it); for a saved one, test again, save any change and Sync now; a saved server's
unchanged settings that work need only Sync now. Before, every failure ended "then save and Sync now", on the page of a
server not yet saved as on one with nothing to save. Real MCP servers: mcp-server-time, and a command not installed."""

import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Group

from catalog.choices import Transport
from catalog.models import Server
from governance.roles import OPERATORS

from .conftest import admin_login, click_through, screenshot, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")
MISSING = "/opt/vendor/bin/mcp-server-not-installed"


def _test_connection(browser, **fields: str) -> str:
    from selenium.webdriver.common.by import By

    for name, value in fields.items():
        box = browser.find_element(By.NAME, name)
        box.clear()
        box.send_keys(value)
    click_through(browser, browser.find_element(By.ID, "test-connection"))
    return wait_for(browser, "#test-connection-next").text


def test_the_step_after_a_connection_test_fits_a_new_or_a_saved_server(browser, live_server, django_user_model):
    from selenium.webdriver.common.by import By

    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    admin_login(browser, live_server.url, "op", "pw-op-123")

    browser.get(f"{live_server.url}/admin/catalog/server/add/")
    browser.find_element(By.NAME, "name").send_keys("Clock")
    step = _test_connection(browser, command=MISSING)
    screenshot(browser, "operator-test-connection-new-failed")
    assert "install it on every machine" in step and "a new server is synced when saved" in step
    assert "Sync now" not in step  # nothing to sync yet: saving syncs it
    assert not Server.objects.exists()

    server = Server.objects.create(slug="clock", name="Clock", transport=Transport.STDIO, command=TIME_SERVER)
    page = f"{live_server.url}/admin/catalog/server/{server.pk}/change/"
    browser.get(page)
    step = _test_connection(browser)  # the saved settings, unchanged: they work
    assert "clock::get_current_time" in browser.find_element(By.ID, "test-connection-tools").text
    assert step == "These are the server's saved settings: Sync now on its page imports them."

    browser.get(page)
    step = _test_connection(browser, command=MISSING)  # a change, not saved, that fails
    screenshot(browser, "operator-test-connection-saved-failed")
    assert "install it on every machine" in step and "save any change to the form and Sync now" in step
    assert "a new server" not in step and "at the bottom of the server's page" not in step  # they just used it

    browser.get(page)
    step = _test_connection(browser, args='["--local-timezone", "UTC"]')  # changed, and it works
    assert step == "Save your changes, then Sync now on the server's page to import them."
    assert Server.objects.get(pk=server.pk).args == [] and not server.tools.exists()  # nothing saved


@pytest.mark.parametrize("width", [1280, 800])
def test_a_failed_test_says_so_first_and_that_nothing_was_saved_last(browser, live_server, django_user_model, width):
    """The page began "Nothing was saved. This is what a sync would import now." above a failed test's error: read as
    the outcome, and wrong (a failure imports nothing). The failure comes first, then what to do, then that the test
    saved nothing, with the way back to the form."""
    from selenium.webdriver.common.by import By

    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    admin_login(browser, live_server.url, "op", "pw-op-123")
    browser.set_window_size(width, 900)
    browser.get(f"{live_server.url}/admin/catalog/server/add/")
    browser.find_element(By.NAME, "name").send_keys("Clock")
    _test_connection(browser, command=MISSING)
    screenshot(browser, f"operator-test-connection-failed-order-{width}")
    content = browser.find_element(By.ID, "content")
    lines = [line for line in content.text.split("\n") if line.strip()]
    error = browser.find_element(By.ID, "test-connection-error").text
    assert error.startswith("The test failed: ") and lines.index(error) < 2  # the page's title, then the failure
    assert lines.index(browser.find_element(By.ID, "test-connection-next").text) == lines.index(error) + 1
    assert lines[-1] == "The test saved nothing. Back to the form (your entries are kept)"
    assert "would import" not in content.text
