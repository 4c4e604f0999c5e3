"""Adminux24: an archived server's page said so only in its Health section, below the connection fields (at 1280 px
the third screen down), and offered "Sync now", which does not run for an archived server. The page opens with it,
what it means for the tools and a Restore button, which brings the server back."""

import pytest
from django.contrib.auth.models import Group

from catalog.choices import ServerStatus, Transport
from catalog.models import Server
from governance.roles import OPERATORS
from tests.governance.factories import ServerFactory

from .conftest import admin_login, click_through, find_now, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_an_archived_servers_page_opens_with_it_and_restores_it(browser, live_server, django_user_model):
    from selenium.webdriver.common.by import By

    # Imported: the restore's sync is not queued (no live connection), so the test needs no upstream.
    server = ServerFactory(slug="old-clock", transport=Transport.IMPORTED, status=ServerStatus.ARCHIVED)
    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    admin_login(browser, live_server.url, "op", "pw-op-123")
    for width in (1280, 800):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/catalog/server/{server.pk}/change/")
        banner = browser.find_element(By.ID, "server-stopped")
        assert banner.text.startswith("Archived Its tools are hidden from every client"), banner.text
        # On the first screen, above the form's first field.
        slug_row = browser.find_element(By.CSS_SELECTOR, ".field-slug")
        assert banner.location["y"] < slug_row.location["y"] and banner.location["y"] < 400
        assert not [button for button in browser.find_elements(By.TAG_NAME, "button") if button.text == "Sync now"]
        screenshot(browser, f"archived-server-{width}")
    click_through(browser, browser.find_element(By.ID, "server-restore"))
    assert "Restored 1 server(s)." in browser.find_element(By.CSS_SELECTOR, ".messagelist").text
    assert Server.objects.get(pk=server.pk).status == ServerStatus.ACTIVE
    browser.get(f"{live_server.url}/admin/catalog/server/{server.pk}/change/")
    assert not find_now(browser, By.ID, "server-stopped")


def test_a_disabled_servers_page_opens_with_how_to_turn_it_back_on(browser, live_server, django_user_model):
    from selenium.webdriver.common.by import By

    server = ServerFactory(slug="paused", status=ServerStatus.DISABLED)
    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    admin_login(browser, live_server.url, "op", "pw-op-123", path=f"/admin/catalog/server/{server.pk}/change/")
    banner = browser.find_element(By.ID, "server-stopped")
    assert banner.text.startswith("Disabled Its tools are hidden from clients and it is not synced"), banner.text
    assert "set its status back to Active (Health, below) and save" in banner.text
    assert not find_now(browser, By.ID, "server-restore")
