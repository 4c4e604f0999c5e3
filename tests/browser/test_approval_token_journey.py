"""From a pending approval to the token it came with, and revoking that token there: the operator's path when a
request looks wrong (decide page → token page → confirmation → revoked)."""

import pytest

from governance.services.approvals import approval_request_create
from tests.governance.conftest import grant, member_token, mutating_tool, server  # noqa: F401 - fixtures

from .conftest import admin_login, click_through, find_now, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_from_a_pending_approval_to_its_token_and_revoke_it(browser, live_server, django_user_model, request):
    from selenium.webdriver.common.by import By

    token, _, principal = request.getfixturevalue("member_token")
    mcp_server = request.getfixturevalue("server")
    request.getfixturevalue("grant")(principal.user, mcp_server, "discover", "execute")
    tool = request.getfixturevalue("mutating_tool")
    pending = approval_request_create(principal=principal, tool=tool, arguments={"name": "repo"})
    django_user_model.objects.create_superuser(username="root", email=None, password="pw-root-123")
    admin_login(
        browser, live_server.url, "root", "pw-root-123", path=f"/admin/governance/approvalrequest/{pending.pk}/decide/"
    )
    related = browser.find_element(By.ID, "approval-related")
    screenshot(browser, "approval-related-links")
    click_through(browser, related.find_element(By.PARTIAL_LINK_TEXT, "The API token"))
    assert f"/admin/governance/apitoken/{token.pk}/change/" in browser.current_url
    assert not find_now(browser, By.NAME, "_save")  # a saved token's fields are read-only
    assert browser.find_element(By.CSS_SELECTOR, "#content h1").text == f"API token {token.name}"  # not "Change …"
    revoke, activity = (
        browser.find_element(By.CSS_SELECTOR, css) for css in ("#token-revoke button", "#token-activity")
    )
    assert revoke.rect["y"] == activity.rect["y"] and revoke.rect["height"] == activity.rect["height"]  # one row
    screenshot(browser, "token-page")
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "#token-revoke button"))
    assert token.name in browser.find_element(By.ID, "revoke-list").text
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "input.scout-deny"))
    assert "Revoked 1 token(s)" in browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text
    token.refresh_from_db()
    assert token.revoked_at is not None
