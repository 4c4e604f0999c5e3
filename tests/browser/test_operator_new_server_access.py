"""After registering a server, the operator is told who sees its tools, and the link leads to where they give
access: the server's page opened at its access sections, not its top (a long form, the access a screen below).
Real MCP server: mcp-server-time."""

import sys
from pathlib import Path

import pytest
from django.contrib.auth.models import Group

from governance.roles import OPERATORS

from .conftest import admin_login, click_through, screenshot, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
TIME_SERVER = str(Path(sys.executable).parent / "mcp-server-time")


def test_a_new_server_leads_to_its_access_sections(browser, live_server, django_user_model):
    from selenium.webdriver.common.by import By

    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    browser.set_window_size(800, 900)
    admin_login(browser, live_server.url, "op", "pw-op-123", path="/admin/catalog/server/add/")
    for name, value in (("slug", "clock"), ("name", "Clock"), ("command", TIME_SERVER)):
        browser.find_element(By.NAME, name).send_keys(value)
    click_through(browser, browser.find_element(By.NAME, "_save"))
    message = wait_for(browser, "ul.messagelist").text
    screenshot(browser, "operator-new-server-saved")
    assert "First sync of clock succeeded: 2 tools added." in message, message
    assert "visible to nobody until you give discover in its access sections" in message, message

    click_through(browser, browser.find_element(By.ID, "access-note"))
    section = browser.find_element(By.ID, "group_grants-group")
    screenshot(browser, "operator-new-server-access")
    top = browser.execute_script("return arguments[0].getBoundingClientRect().top;", section)
    assert 0 <= top < browser.execute_script("return window.innerHeight;"), "the access sections are out of view"
