"""The approver's inbox at 1280 px: the call's tool id on at most two lines, "who asked" a line each for
the person, their agent and the time, and
a left navigation no wider than its one link needs (adminux25: the tool id wrapped over three lines, the nav took
290 px for "Approval requests")."""

import os

import pytest

from governance.services.approvals import approval_request_create
from tests.governance.factories import tenant_token, tenant_with

from .conftest import admin_login, approver_and_tool, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

# Lines of each matching element: the distinct tops of its line boxes (<wbr> splits a line into several boxes).
LINES = """return [...document.querySelectorAll(arguments[0])].map(
  e => new Set([...e.getClientRects()].map(r => Math.round(r.top))).size);"""
FITS = "const e = document.querySelector('#changelist .results'); return e.scrollWidth <= e.clientWidth;"
WIDTH = "return document.querySelector(arguments[0]).getBoundingClientRect().width;"


def test_the_inbox_gives_the_call_and_who_asked_room_at_1280(browser, live_server, member, django_user_model):
    tool = approver_and_tool(django_user_model, member, server="restaurant-bookings", tool="book_table_at_restaurant")
    _, _, principal = tenant_token(member, "acme")
    tenant_with("acme", django_user_model.objects.get(username="appr"))
    for n in range(2):
        approval_request_create(principal=principal, tool=tool, arguments={"party": n + 2, "time": "19:30"})
    browser.set_window_size(1280, 900)
    admin_login(browser, live_server.url, "appr", "pw-appr-123")
    browser.get(f"{live_server.url}/admin/governance/approvalrequest/")
    assert len(browser.find_elements("css selector", "#result_list tbody tr")) == 2
    shot = os.environ.get("SCOUT_SCREENSHOT_TAG")
    if shot:
        screenshot(browser, f"approver-inbox-1280-{shot}")
    tool_lines = browser.execute_script(LINES, "#result_list td.field-tool_column > a")
    assert max(tool_lines) <= 2, f"the tool id wraps over {tool_lines} lines"
    who_lines = browser.execute_script(LINES, "#result_list td.field-requester_column")
    assert max(who_lines) <= 3, f"who asked, via which agent, when: {who_lines} lines, not one each"
    nav = browser.execute_script(WIDTH, "#nav-sidebar")
    assert nav <= 220, f"the left navigation takes {nav:.0f} px for one link"
    assert browser.execute_script(FITS), "the inbox scrolls sideways at 1280 px"
    if shot:  # the half-screen window too, for the notes (bench/NOTES-adminux26.md)
        browser.set_window_size(800, 900)
        browser.get(f"{live_server.url}/admin/governance/approvalrequest/")
        screenshot(browser, f"approver-inbox-800-{shot}")
