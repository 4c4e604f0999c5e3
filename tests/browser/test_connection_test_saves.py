"""Test connection's page says "Save the server to import them" and had only a way back to the form: the operator
went back and found Save there. It saves from where it says so: the form as tested, posted to the form's own page
(adminux25). A scripted stdio MCP server (tests/catalog/servers/scripted_stdio.py): it starts at once."""

import json
import sys

import pytest
from django.contrib.auth.models import Group

from catalog.models import Server
from governance.roles import OPERATORS
from tests.catalog.servers.fixtures import SCRIPTED, good_tool

from .conftest import admin_login, click_through, screenshot, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_tested_new_server_is_saved_and_synced_from_the_test_page(browser, live_server, django_user_model, tmp_path):
    from selenium.webdriver.common.by import By

    script = tmp_path / "clock.json"
    script.write_text(json.dumps({"pages": [[good_tool("get_current_time"), good_tool("convert_time")]]}))
    args = [str(SCRIPTED), str(script)]

    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    browser.set_window_size(800, 900)
    admin_login(browser, live_server.url, "op", "pw-op-123", path="/admin/catalog/server/add/")
    fields = {"slug": "clock", "name": "Clock", "command": sys.executable, "args": json.dumps(args)}
    for name, value in fields.items():
        box = browser.find_element(By.NAME, name)
        box.clear()
        box.send_keys(value)
    click_through(browser, browser.find_element(By.ID, "test-connection"))
    assert "clock::get_current_time" in wait_for(browser, "#test-connection-tools").text
    save = browser.find_element(By.CSS_SELECTOR, "#test-connection-save button")
    screenshot(browser, "operator-test-connection-save")
    assert save.text == "Save this server" and save.is_displayed()
    assert not Server.objects.exists()  # the test itself saved nothing

    click_through(browser, save)
    message = wait_for(browser, "ul.messagelist").text
    screenshot(browser, "operator-test-connection-saved")
    assert "First sync of clock succeeded: 2 tools added." in message, message
    server = Server.objects.get(slug="clock")
    assert (server.name, server.command, server.args) == ("Clock", sys.executable, args)
