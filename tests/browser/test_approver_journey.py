"""Approver journey in a real browser against the live gateway: a call over MCP waits for approval; the approver
sees it on their home page, reads the tool's description and risk, denies it with a reason the agent receives,
then approves another call, which runs. The inbox and decide page also work at phone width."""

from __future__ import annotations

from typing import Any

import pytest
from django.contrib.auth.models import Group

from governance.roles import APPROVERS
from tests.mcpgateway.conftest import MODERN, faulty_calls, grant, make_token, make_user, mcp_client, run

from .conftest import admin_login, click_through, find_now, screenshot
from .gateway_fixtures import *  # noqa: F403 - live gateway fixtures

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
TOOL = "faulty::record_note"


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _right_edge_visible(browser, element) -> bool:
    width = browser.execute_script("return document.documentElement.clientWidth")
    right = browser.execute_script("return arguments[0].getBoundingClientRect().right", element)
    return 0 < right <= width


def _no_sideways_scroll(browser, css: str) -> bool:
    return browser.execute_script(
        "const e = document.querySelector(arguments[0]); return e.scrollWidth <= e.clientWidth;", css
    )


def _tool_cell_pieces(browser) -> list[tuple[str, int]]:
    """The approval inbox's tool cell as its text pieces, each with the number of lines it is laid out on."""
    return browser.execute_script(
        """const cell = document.querySelector('#result_list td.field-tool_column');
        const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
        const pieces = [];
        for (let node = walker.nextNode(); node; node = walker.nextNode()) {
            const range = document.createRange();
            range.selectNodeContents(node);
            const lines = new Set([...range.getClientRects()].map((rect) => Math.round(rect.top)));
            pieces.push([node.textContent, lines.size]);
        }
        return pieces;"""
    )


def test_approver_denies_with_a_reason_then_approves_a_call_that_runs(
    browser, gateway, admin_user, faulty_server, faulty_call_log
):
    from selenium.webdriver.common.by import By

    member = make_user("gw_member")
    grant(admin_user, faulty_server, member, "discover", "execute")
    approver = make_user("gw_approver", is_staff=True, email="approver@example.com")
    approver.groups.add(Group.objects.get(name=APPROVERS))
    grant(admin_user, faulty_server, Group.objects.get(name=APPROVERS), "approve")  # the operator's step
    token = make_token(member)

    async def ask(note: str, approval_id: str | None = None) -> Any:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            payload: dict[str, Any] = {"tool_id": TOOL, "arguments": {"note": note}}
            if approval_id:
                payload["approval_id"] = approval_id
            return await client.call_tool("execute_tool", payload)

    first = run(lambda: ask("delete every customer record"))
    assert first.structured_content["approval_required"] is True
    first_id = first.structured_content["approval_id"]

    admin_login(browser, gateway.url, "gw_approver", "pw-gw_approver-123", form=True)
    assert browser.find_element(By.CSS_SELECTOR, "#pending-approvals strong").text == "1"  # the header count
    home = browser.find_element(By.ID, "approver-home")
    assert "Approvals waiting for you: 1" in home.text and TOOL in home.text
    screenshot(browser, "approver-home")

    browser.get(f"{gateway.url}/admin/governance/approvalrequest/")
    decide = browser.find_element(By.LINK_TEXT, "Decide")
    assert _right_edge_visible(browser, decide)  # at 1280 px the action is on screen
    screenshot(browser, "approver-inbox")
    # ... with its filters open (no navigation sidebar on the inbox), and nothing scrolls sideways: not the page, not
    # the results table.
    assert not find_now(browser, By.ID, "nav-sidebar")
    assert browser.find_element(By.ID, "changelist-filter").is_displayed()
    assert _no_sideways_scroll(browser, "#changelist .results") and _no_sideways_scroll(browser, "html")
    assert _right_edge_visible(browser, browser.find_element(By.CSS_SELECTOR, "#result_list td.field-requester_column"))
    # The tool id wraps only after "::" and "_" (never "memor y::crea te_enti ties"): no piece spans two lines,
    # here and in a window narrow enough to squeeze the column (800 px, the inbox a list of cards); under it
    # the call's arguments.
    for width in (800, 1280):
        browser.set_window_size(width, 900)
        browser.get(f"{gateway.url}/admin/governance/approvalrequest/")
        pieces = _tool_cell_pieces(browser)
        expected = ["faulty::", "record_", "note", 'note: "delete every customer record"']
        assert [text for text, _ in pieces] == expected, (width, pieces)
        assert all(lines == 1 for _, lines in pieces[:3]), (width, pieces)  # the id's pieces; the arguments wrap
        if width == 800:
            screenshot(browser, "approver-inbox-narrow")
    decide = browser.find_element(By.LINK_TEXT, "Decide")
    click_through(browser, decide)
    card = browser.find_element(By.ID, "tool-card")
    assert "Store a note (changes state: every call writes one record)." in card.text
    assert "destructiveHint" in card.text
    risk = browser.find_element(By.CSS_SELECTOR, "#decide-tool .scout-risk")
    assert "risk" in risk.text and "risk-" in risk.get_attribute("class")
    approve = browser.find_element(By.NAME, "_approve")
    deny = browser.find_element(By.NAME, "_deny")
    assert approve.value_of_css_property("background-color") != deny.value_of_css_property("background-color")
    screenshot(browser, "approver-decide")
    browser.find_element(By.NAME, "reason").send_keys("Customer records are never deleted in bulk.")
    click_through(browser, deny)
    message = browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text
    assert message.startswith(f"Denied {TOOL} for gw_member ({first_id})") and message.endswith(
        "Nothing else waits for you."
    )

    denied = run(lambda: ask("delete every customer record", first_id))
    assert denied.is_error and "Customer records are never deleted in bulk." in _text(denied)
    assert "Do not retry this call unchanged" in _text(denied)

    second = run(lambda: ask("add a note to the release checklist"))
    second_id = second.structured_content["approval_id"]
    browser.set_window_size(390, 844)  # a phone
    browser.get(f"{gateway.url}/admin/governance/approvalrequest/?status__exact=pending")
    decide = browser.find_element(By.LINK_TEXT, "Decide")
    assert _no_sideways_scroll(browser, "html")  # the phone scrolls the results box, never the page
    screenshot(browser, "approver-inbox-phone")
    click_through(browser, decide)
    approve = browser.find_element(By.NAME, "_approve")
    assert _right_edge_visible(browser, approve)
    arguments = browser.find_element(By.ID, "decide-arguments")  # read before the button that approves them
    assert "add a note to the release checklist" in arguments.text and arguments.location["y"] < approve.location["y"]
    screenshot(browser, "approver-decide-phone")
    click_through(browser, approve)
    assert browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text.startswith(
        f"Approved {TOOL} for gw_member ({second_id})"
    )

    done = run(lambda: ask("add a note to the release checklist", second_id))
    assert not done.is_error and "stored" in _text(done)
    assert faulty_calls(faulty_call_log, "record_note") == 1
