"""Operator journey in a real browser against the live gateway: register a server (testing the connection
first), give a person access on the server form, see the first sync, see a tool held after its upstream
definition changed, accept the review, and an MCP client can call the tool."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from django.contrib.auth.models import Group
from mcp.shared.exceptions import MCPError

from governance.roles import OPERATORS
from mcpgateway.constants import UNKNOWN_TOOL_MESSAGE
from tests.mcpgateway.conftest import FAULTY_SERVER, make_token, make_user, mcp_client, run, unknown_tool_text

from .conftest import POLL, admin_login, click_through, find_now, screenshot, wait_for
from .gateway_fixtures import *  # noqa: F403 - live gateway fixtures

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
TOOL = "faulty::ping"


def _call(gateway, token: str) -> Any:
    async def main():
        async with mcp_client(gateway, token) as client:
            try:
                return await client.call_tool("execute_tool", {"tool_id": TOOL, "arguments": {"text": "hello"}})
            except MCPError as error:
                return error

    return run(main)


def _list_tools(gateway, token: str) -> str:
    async def main():
        async with mcp_client(gateway, token) as client:
            result = await client.call_tool("tool_search", {"query": "answer with the given text"})
            return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")

    return run(main)


def _fill_server_form(browser) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    for name, value in (
        ("slug", "faulty"),
        ("name", "Faulty test server"),
        ("command", sys.executable),
        ("args", f'["{FAULTY_SERVER}"]'),
        ("env_vars", '["FAULTY_CALL_LOG", "FAULTY_PING_DESCRIPTION_FILE"]'),
    ):
        field = browser.find_element(By.NAME, name)
        field.clear()
        field.send_keys(value)
    Select(browser.find_element(By.NAME, "transport")).select_by_value("stdio")


def _autocomplete(browser, selection_css: str, text: str) -> None:
    """Pick ``text`` in a select2 autocomplete (``selection_css`` finds its clickable box), then see it chosen.

    The results list is drawn again when its AJAX answer lands (after "Searching..."), so an option found a
    moment earlier can be gone by the click: find and click it in one step, again until one click holds."""
    from selenium.common.exceptions import (
        ElementNotInteractableException,
        NoSuchElementException,
        StaleElementReferenceException,
    )
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    browser.find_element(By.CSS_SELECTOR, selection_css).click()
    browser.find_element(By.CSS_SELECTOR, ".select2-container--open .select2-search__field").send_keys(text)
    option_xpath = f"//li[contains(@class,'select2-results__option') and text()='{text}']"

    def click_option(driver) -> bool:
        try:
            driver.find_element(By.XPATH, option_xpath).click()
        except (NoSuchElementException, StaleElementReferenceException, ElementNotInteractableException):
            return False
        return True

    WebDriverWait(browser, 30, POLL).until(click_option)
    WebDriverWait(browser, 30, POLL).until(
        lambda driver: text in driver.find_element(By.CSS_SELECTOR, selection_css).text
    )


def test_operator_registers_grants_syncs_and_releases_a_changed_tool(
    browser, gateway, admin_user, faulty_call_log, monkeypatch, tmp_path
):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    description = tmp_path / "ping-description.txt"
    monkeypatch.setenv("FAULTY_PING_DESCRIPTION_FILE", str(description))  # no file yet: ping keeps its docstring
    operator = make_user("gw_operator", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    member = make_user("gw_member")
    token = make_token(member)

    admin_login(browser, gateway.url, "gw_operator", "pw-gw_operator-123", form=True)
    assert "Servers: 0" in browser.find_element(By.ID, "operator-home").text
    screenshot(browser, "operator-home-empty")

    browser.get(f"{gateway.url}/admin/catalog/server/add/")
    _fill_server_form(browser)
    click_through(browser, browser.find_element(By.ID, "test-connection"))
    assert "tool" in wait_for(browser, "#test-connection-count").text
    assert "faulty::ping" in browser.find_element(By.ID, "test-connection-tools").text
    screenshot(browser, "operator-test-connection")
    browser.back()
    if browser.find_element(By.NAME, "slug").get_attribute("value") != "faulty":
        _fill_server_form(browser)  # a browser that does not restore the form

    # Access on the form: the member may discover and execute (two rows, the second added with the link).
    _autocomplete(browser, "#user_grants-0 .select2-selection", "gw_member")
    Select(browser.find_element(By.NAME, "user_grants-0-permission")).select_by_visible_text("discover")
    browser.find_element(By.CSS_SELECTOR, "#user_grants-group .add-row a").click()
    _autocomplete(browser, "#user_grants-1 .select2-selection", "gw_member")
    Select(browser.find_element(By.NAME, "user_grants-1-permission")).select_by_visible_text("execute")
    screenshot(browser, "operator-server-form")
    click_through(browser, browser.find_element(By.NAME, "_save"))
    messages = wait_for(browser, "ul.messagelist").text  # the first sync runs in this request, and says how it went
    assert "First sync of faulty succeeded:" in messages and "tools added." in messages
    assert "Its tools are visible to the groups and people given discover" in messages
    row = browser.find_element(By.XPATH, "//tr[.//a[text()='faulty']]")
    assert "Active" in row.text and "live" in row.text and "held" not in row.text  # synced on create
    screenshot(browser, "operator-servers")

    first = _call(gateway, token)
    assert not isinstance(first, MCPError) and not first.is_error

    # Upstream changes ping's definition; the operator syncs and sees it held everywhere.
    description.write_text("Answer with the given text and forward it to a remote log.", encoding="utf-8")
    click_through(browser, browser.find_element(By.LINK_TEXT, "faulty"))
    click_through(browser, browser.find_element(By.XPATH, "//button[text()='Sync now']"))
    # It ran in this request (tasks in-process), and says so: the changed definition is held, not live.
    synced = wait_for(browser, "ul.messagelist").text
    assert "Sync of faulty succeeded: 1 changed" in synced and "added" not in synced and "1 held." in synced
    browser.get(f"{gateway.url}/admin/catalog/server/")
    row = browser.find_element(By.XPATH, "//tr[.//a[text()='faulty']]")
    assert "1 held" in row.text
    screenshot(browser, "operator-servers-held")
    held = _call(gateway, token)
    assert not isinstance(held, MCPError) and unknown_tool_text(held) == UNKNOWN_TOOL_MESSAGE  # as if it did not exist

    click_through(browser, row.find_element(By.PARTIAL_LINK_TEXT, "held"))
    tool_row = browser.find_element(By.XPATH, f"//tr[.//a[.='{TOOL}']]")  # the id's text breaks at <wbr>
    assert "held — hidden from clients" in tool_row.text
    screenshot(browser, "operator-tools-held")
    click_through(browser, tool_row.find_element(By.LINK_TEXT, "review"))
    diff = browser.find_element(By.CSS_SELECTOR, ".scout-diff")
    assert "forward it to a remote log" in diff.text
    screenshot(browser, "operator-review")
    browser.find_element(By.NAME, "review_reason").send_keys("Read the new description: still a harmless echo.")
    click_through(browser, browser.find_element(By.NAME, "_accept"))
    assert "callable again" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text

    released = _call(gateway, token)
    assert not isinstance(released, MCPError) and not released.is_error, released
    assert "hello" in "".join(block.text for block in released.content if getattr(block, "type", "") == "text")
    browser.get(f"{gateway.url}/admin/")
    screenshot(browser, "operator-home")

    # A token for another person: only a superuser issues one (the operator would be that person over /mcp).
    def issue_for_member() -> None:
        browser.get(f"{gateway.url}/admin/governance/apitoken/add/")
        _autocomplete(browser, "#id_user + .select2 .select2-selection", "gw_member")
        browser.find_element(By.NAME, "name").send_keys("cursor on alice's laptop")
        click_through(browser, browser.find_element(By.NAME, "_save"))

    issue_for_member()
    assert "only a superuser issues a token for someone else" in browser.find_element(By.ID, "content").text
    assert not find_now(browser, By.ID, "raw-token")
    # The superuser issues it: the user picked by autocomplete, the raw token shown once with client configs.
    browser.delete_all_cookies()
    admin_login(browser, gateway.url, "gw_admin", "pw-gw_admin-123", form=True)
    issue_for_member()
    raw = browser.find_element(By.ID, "raw-token").text
    assert raw.startswith("scout_") and f"Bearer {raw}" in browser.find_element(By.ID, "config-1").text
    assert f"{gateway.url}/mcp" in browser.find_element(By.ID, "config-2").text
    screenshot(browser, "operator-token-created")
    listed = _list_tools(gateway, raw)
    assert TOOL in listed  # the new token works as shown
