"""Operator journeys in a real browser against the live gateway: access given on one tool's own page reaches
the member's MCP client over HTTP; giving oneself approve is refused; the log of approval notifications shows
a webhook that was sent and one that failed."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest
from django.contrib.auth.models import Group
from mcp.shared.exceptions import MCPError

from governance.models import ServerUserObjectPermission, ToolUserObjectPermission
from governance.roles import OPERATORS
from mcpgateway.constants import UNKNOWN_TOOL_MESSAGE
from tests.mcpgateway.conftest import grant, make_token, make_user, mcp_client, run, unknown_tool_text

from .conftest import admin_login, click_through, screenshot, wait_for
from .gateway_fixtures import *  # noqa: F403 - live gateway fixtures
from .test_operator_journey import _autocomplete

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
TOOL = "faulty::ping"


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _inspect_and_call(gateway, token: str) -> tuple[Any, Any]:
    async def main():
        async with mcp_client(gateway, token) as client:
            results = []
            for name, arguments in (
                ("tool_inspect", {"tool_ids": [TOOL]}),
                ("execute_tool", {"tool_id": TOOL, "arguments": {"text": "hello"}}),
            ):
                try:
                    results.append(await client.call_tool(name, arguments))
                except MCPError as error:
                    results.append(error)
            return tuple(results)

    return run(main)


def _hidden(outcome: Any) -> bool:
    return not isinstance(outcome, MCPError) and unknown_tool_text(outcome) == UNKNOWN_TOOL_MESSAGE


@pytest.fixture
def operator(transactional_db):
    user = make_user("gw_operator", is_staff=True)
    user.groups.add(Group.objects.get(name=OPERATORS))
    return user


def test_access_given_on_the_tool_form_reaches_the_members_mcp_client(browser, gateway, operator, faulty_server):
    from selenium.webdriver.support.ui import Select

    from catalog.models import Tool

    member = make_user("gw_member")
    token = make_token(member)
    inspected, called = _inspect_and_call(gateway, token)
    assert _hidden(inspected) and _hidden(called)  # no grant yet: the member's client cannot see it

    admin_login(browser, gateway.url, "gw_operator", "pw-gw_operator-123")
    tool = Tool.objects.get(tool_id=TOOL)
    browser.get(f"{gateway.url}/admin/catalog/tool/{tool.pk}/change/")
    _autocomplete(browser, "#user_grants-0 .select2-selection", "gw_member")
    Select(browser.find_element("name", "user_grants-0-permission")).select_by_visible_text("discover")
    browser.find_element("css selector", "#user_grants-group .add-row a").click()
    _autocomplete(browser, "#user_grants-1 .select2-selection", "gw_member")
    Select(browser.find_element("name", "user_grants-1-permission")).select_by_visible_text("execute")
    screenshot(browser, "operator-tool-access")
    click_through(browser, browser.find_element("name", "_save"))
    assert wait_for(browser, "ul.messagelist li.success").text == f"Saved the access to {TOOL}."
    assert set(
        ToolUserObjectPermission.objects.filter(content_object=tool, user=member).values_list(
            "permission__codename", flat=True
        )
    ) == {"discover_tool", "execute_tool"}

    inspected, called = _inspect_and_call(gateway, token)
    assert not isinstance(inspected, MCPError) and not inspected.is_error and TOOL in _text(inspected)
    assert not isinstance(called, MCPError) and not called.is_error and "hello" in _text(called)

    async def other_tool():
        async with mcp_client(gateway, token) as client:
            try:
                return await client.call_tool("tool_inspect", {"tool_ids": ["faulty::record_note"]})
            except MCPError as error:
                return error

    assert _hidden(run(other_tool))  # the grant was for this one tool only


def test_an_operator_cannot_give_themselves_approve(browser, gateway, operator, faulty_server):
    from selenium.webdriver.support.ui import Select

    admin_login(
        browser,
        gateway.url,
        "gw_operator",
        "pw-gw_operator-123",
        path=f"/admin/catalog/server/{faulty_server.pk}/change/",
    )
    _autocomplete(browser, "#user_grants-0 .select2-selection", "gw_operator")
    Select(browser.find_element("name", "user_grants-0-permission")).select_by_visible_text("approve")
    click_through(browser, browser.find_element("name", "_save"))
    error_list = wait_for(browser, "#user_grants-group .errorlist")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", error_list)
    error = error_list.text
    assert "You cannot give yourself approve" in error and "another operator must grant it" in error
    screenshot(browser, "operator-self-grant-refused")
    assert not ServerUserObjectPermission.objects.filter(user=operator).exists()


@pytest.fixture
def webhook_endpoint():
    """A real HTTP endpoint: /ok answers 200, anything else 500."""

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200 if self.path == "/ok" else 500)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


def test_the_notification_log_shows_a_sent_and_a_failed_webhook(
    browser, gateway, operator, admin_user, faulty_server, webhook_endpoint, settings
):
    from catalog.models import Tool
    from governance.principals import principal_for_user
    from governance.services.approvals import approval_request_create
    from governance.services.notifications import WebhookError, approval_notify

    member = make_user("gw_member")
    grant(admin_user, faulty_server, member, "discover", "execute")
    tool = Tool.objects.get(tool_id="faulty::record_note")
    settings.SCOUT_APPROVAL_WEBHOOK_URL = ""  # each request is notified below, against the endpoint
    first, second = (
        approval_request_create(principal=principal_for_user(member), tool=tool, arguments={"note": note})
        for note in ("one", "two")
    )
    settings.SCOUT_APPROVAL_WEBHOOK_URL = f"{webhook_endpoint}/ok"
    approval_notify(request_pk=first.pk)
    settings.SCOUT_APPROVAL_WEBHOOK_URL = f"{webhook_endpoint}/broken"
    with pytest.raises(WebhookError):
        approval_notify(request_pk=second.pk)

    admin_login(browser, gateway.url, "gw_operator", "pw-gw_operator-123")
    home = browser.find_element("id", "failed-notifications")
    assert home.text.endswith(": 1")
    click_through(browser, browser.find_element("link text", "Notification log"))
    rows = browser.find_elements("css selector", "#result_list tbody tr")
    # Operators read the log but do not decide: the request is named, not linked to a decide page they get 403 from.
    by_request = {row.find_element("css selector", "td.field-approval_text").text: row.text for row in rows}
    assert "/decide/" not in browser.page_source
    failed = by_request[second.approval_id]
    assert "Failed" in failed and "approval webhook answered 500" in failed
    screenshot(browser, "operator-notifications-failed")
    browser.get(f"{gateway.url}/admin/governance/notificationattempt/")
    rows = browser.find_elements("css selector", "#result_list tbody tr")
    by_request = {row.find_element("css selector", "td.field-approval_text").text: row.text for row in rows}
    assert "Sent" in by_request[first.approval_id] and "HTTP 200" in by_request[first.approval_id]
    assert "Failed" in by_request[second.approval_id]
    assert "/ok" not in browser.page_source and "/broken" not in browser.page_source  # the host only
    assert browser.execute_script(
        "const e = document.querySelector('#changelist .results');return e.scrollWidth <= e.clientWidth;"
    )  # fits at 1280 px
    screenshot(browser, "operator-notifications")
    browser.get(f"{gateway.url}/admin/catalog/server/")  # the server list fits too: its last column in view
    assert browser.execute_script(
        "const e = document.querySelector('#changelist .results');return e.scrollWidth <= e.clientWidth;"
    )
    screenshot(browser, "operator-servers")
