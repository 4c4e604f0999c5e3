"""An operator reading how syncs went, in the server list, the home page and the sync runs, at 1280 and 800 px, after
real syncs that failed (a command that is not installed, a host Scout may not reach)."""

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone

from catalog.choices import SyncStatus, Transport
from catalog.models import Server, SyncRun
from catalog.services.sync import server_sync
from catalog.tasks import close_dead_sync_runs
from governance.roles import OPERATORS

from .conftest import admin_login, click_through, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
PAGE_FITS = "return document.documentElement.scrollWidth <= document.documentElement.clientWidth;"
MISSING_COMMAND = "/opt/vendor/weather/bin/mcp-weather-server-production"
# Where the text of an element wraps: for each line break, the character before it and the one after it.
LINE_BREAKS = """const breaks = [];
const walker = document.createTreeWalker(arguments[0], NodeFilter.SHOW_TEXT);
let top = null, before = "";
for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (let i = 0; i < node.length; i++) {
        const range = document.createRange();
        range.setStart(node, i);
        range.setEnd(node, i + 1);
        const rects = range.getClientRects();
        if (rects.length && node.data[i].trim()) {
            const at = Math.round(rects[0].top);
            if (top !== null && at > top + 2) breaks.push(before + "|" + node.data[i]);
            top = at;
        }
        before = node.data[i];
    }
}
return breaks;"""


def _operator(django_user_model) -> None:
    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))


def _failed_server(slug: str, **fields) -> Server:
    server = Server.objects.create(slug=slug, name=slug, transport=Transport.STDIO, command=MISSING_COMMAND, **fields)
    server_sync(server_pk=server.pk)  # a real sync, which fails: the command is not installed
    return server


def test_a_server_no_sync_ever_succeeded_for_says_so_under_its_failed_sync(browser, live_server, django_user_model):
    """The server list's last sync showed "Failed" over "—" for a server whose first sync failed (no time, no
    meaning), and "Failed" over the last good sync's time for one failing since, read as the failure's time."""
    from selenium.webdriver.common.by import By

    _failed_server("weather")
    synced = timezone.now() - timezone.timedelta(days=2)
    _failed_server("tickets", last_synced_at=synced)
    _operator(django_user_model)
    admin_login(browser, live_server.url, "op", "pw-op-123")
    for width in (1280, 800):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/catalog/server/")
        rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
        cells = {row.find_element(By.CSS_SELECTOR, ".field-slug_column").text: row for row in rows}
        cells = {slug: row.find_element(By.CSS_SELECTOR, ".field-last_run") for slug, row in cells.items()}
        screenshot(browser, f"operator-server-list-never-synced-{width}")
        assert cells["weather"].text.split("\n") == ["Failed", "never synced successfully"], width
        assert cells["weather"].is_displayed() and cells["weather"].rect["x"] + cells["weather"].rect["width"] <= width
        good = timezone.localtime(synced)
        assert cells["tickets"].text.split("\n") == ["Failed", "last good:", f"{good:%Y-%m-%d}", f"{good:%H:%M}"]
        assert browser.execute_script(PAGE_FITS), width
    browser.get(f"{live_server.url}/admin/")  # the home's server table says it as the list does
    row = browser.find_element(By.XPATH, "//section[@id='operator-home']//tr[.//a[text()='weather']]")
    assert row.find_element(By.CSS_SELECTOR, "td[data-label='Last sync']").text == "never synced successfully"


def test_a_failed_runs_error_wraps_between_words_in_the_run_list(browser, live_server, django_user_model, settings):
    """At 800 px the error column was a few letters wide and broke anywhere ("SCOUT_UPSTRE|AM_ALL|OWED_H|OSTS",
    "comman|d"): the error now has a line of its own under its row at that width, and breaks between words, or
    after a path's / or a name's _, at both widths."""
    from selenium.webdriver.common.by import By

    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = []
    _failed_server("weather-service-production-eu")
    refused = Server.objects.create(
        slug="tickets", name="Tickets", transport=Transport.HTTP, url="http://127.0.0.1:9/mcp"
    )
    server_sync(server_pk=refused.pk)  # refused: the host is not in SCOUT_UPSTREAM_ALLOWED_HOSTS
    _operator(django_user_model)
    admin_login(browser, live_server.url, "op", "pw-op-123")
    for width in (800, 1280):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/catalog/syncrun/")
        screenshot(browser, f"operator-syncrun-errors-{width}")
        errors = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody td.field-short_error")
        texts = " ".join(cell.text for cell in errors)
        assert "SCOUT_UPSTREAM_ALLOWED_HOSTS" in texts.replace("\n", "") and "command not found" in texts
        for cell in errors:
            breaks = browser.execute_script(LINE_BREAKS, cell)
            assert all(pair[0] in " /_-" for pair in breaks), (width, breaks)
        assert browser.execute_script(PAGE_FITS), width


def test_the_dashboards_status_slices_lead_to_the_failing_runs_and_servers(browser, live_server, django_user_model):
    """The dashboard's doughnuts showed a red slice for failed syncs and unavailable servers and led nowhere: under
    each, every status is a link to those runs (of the window shown) or servers, and from there to the server's page,
    which says what failed and what to do."""
    from selenium.webdriver.common.by import By

    from tests.governance.factories import ServerFactory

    _failed_server("weather")
    healthy = ServerFactory(slug="clock", last_synced_at=timezone.now())
    SyncRun.objects.create(
        server=healthy, status=SyncStatus.SUCCESS, started_at=timezone.now() - timezone.timedelta(days=3)
    )
    _operator(django_user_model)
    admin_login(browser, live_server.url, "op", "pw-op-123", path="/admin/dashboard/")
    assert browser.find_element(By.ID, "chart-syncs-links").text == "Failed: 1"  # the 3-day-old run is not in 24 h
    assert browser.find_element(By.ID, "chart-servers-links").text == "Active: 1 · Unavailable: 1"
    screenshot(browser, "operator-dashboard-status-links")
    click_through(browser, browser.find_element(By.LINK_TEXT, "Failed: 1"))
    rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    assert len(rows) == 1 and "command not found" in rows[0].text and "weather" in rows[0].text

    browser.get(f"{live_server.url}/admin/dashboard/")
    click_through(browser, browser.find_element(By.LINK_TEXT, "Unavailable: 1"))
    [row] = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
    click_through(browser, row.find_element(By.LINK_TEXT, "weather"))
    panel = browser.find_element(By.ID, "sync-failed").text
    assert MISSING_COMMAND in panel and "install it on every machine that runs Scout" in panel


def test_a_failing_server_on_home_leads_to_what_to_do_about_it(browser, live_server, django_user_model):
    """Home listed a failing server with its error and "Retry sync" alone, which a missing command or a refused host
    fails again: "What to do about it" opens the server's page at the panel that says it for that error."""
    from selenium.webdriver.common.by import By

    _failed_server("weather")
    _operator(django_user_model)
    admin_login(browser, live_server.url, "op", "pw-op-123", path="/admin/")
    failing = browser.find_element(By.ID, "failing-weather")
    click_through(browser, failing.find_element(By.LINK_TEXT, "What to do about it"))
    assert browser.current_url.endswith("#sync-failed")
    panel = browser.find_element(By.ID, "sync-failed")
    assert "install it on every machine that runs Scout" in panel.text
    screenshot(browser, "operator-home-what-to-do")


def test_retry_sync_on_home_is_listed_in_the_operators_recent_actions_with_its_outcome(
    browser, live_server, django_user_model
):
    """opsux11: a sync the operator asked for ("Retry sync" on the home, "Sync now", a new server) was in no "Your
    recent actions"; and a killed worker's run, failed in the lists, was left out of the home's failures. Both are on
    the home now, at 1280 px in the sidebar beside the servers."""
    from selenium.webdriver.common.by import By

    _failed_server("weather")
    dead = Server.objects.create(slug="tickets", name="Tickets", transport=Transport.STDIO, command=MISSING_COMMAND)
    SyncRun.objects.create(
        server=dead, status=SyncStatus.RUNNING, started_at=timezone.now()
    )  # no lock: its worker died
    close_dead_sync_runs()  # the beat's (mend3: no page closes it)
    _operator(django_user_model)
    admin_login(browser, live_server.url, "op", "pw-op-123")
    browser.set_window_size(1280, 900)
    browser.get(f"{live_server.url}/admin/")
    failing = browser.find_element(By.ID, "failing-weather")
    click_through(browser, failing.find_element(By.CSS_SELECTOR, "button[type=submit]"))  # a real sync, failing again
    browser.get(f"{live_server.url}/admin/")
    screenshot(browser, "operator-home-recent-syncs-1280")
    recent = browser.find_element(By.ID, "recent-actions").text.split("\n")
    assert recent[:2] == ["Sync: failed", "weather"], recent
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "#recent-actions a"))
    assert "command not found" in browser.find_element(By.ID, "content").text  # the run's page, with its error
    # opsux12: the run's page says who asked for it.
    started_by = browser.find_element(By.CSS_SELECTOR, ".field-started_by_name")
    assert started_by.text.split("\n") == ["Started by:", "op"], started_by.text
    screenshot(browser, "operator-syncrun-started-by-1280")
    assert browser.execute_script(PAGE_FITS)
    browser.get(f"{live_server.url}/admin/")
    home = browser.find_element(By.ID, "operator-home").text
    assert "Sync failures in the last 7 days: 3" in home and "interrupted: the process running this sync" in home
    assert "Never synced" not in home  # opsux12: the killed worker's server reads as a failed first sync
    assert browser.execute_script(PAGE_FITS)
