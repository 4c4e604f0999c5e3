"""An approver refuses several pending calls at once: ticks them on the inbox, writes one reason, "Deny selected";
at 1280 px beside both sidebars and at 800 px, where each request is a card. Each call is denied with that reason;
the one not ticked still waits."""

import pytest

from governance.choices import ApprovalStatus
from governance.models import ApprovalRequest
from governance.principals import principal_for_user

from .conftest import POLL, admin_login, approver_and_tool, click_through, find_now, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
NO_SIDEWAYS = "return document.documentElement.scrollWidth <= document.documentElement.clientWidth;"


@pytest.mark.parametrize("width", [1280, 800])
def test_an_approver_denies_the_ticked_calls_with_one_reason(browser, live_server, django_user_model, member, width):
    from selenium.webdriver.common.by import By

    from governance.services.approvals import approval_request_create

    tool = approver_and_tool(django_user_model, member, server="github", tool="delete_branch")
    asked = [
        approval_request_create(principal=principal_for_user(member), tool=tool, arguments={"branch": f"old-{n}"})
        for n in range(3)
    ]
    browser.set_window_size(width, 900)
    admin_login(browser, live_server.url, "appr", "pw-appr-123", path="/admin/governance/approvalrequest/")
    boxes = browser.find_elements(By.CSS_SELECTOR, "#result_list input.action-select")
    assert len(boxes) == 3 and browser.execute_script(NO_SIDEWAYS)
    for box in boxes[:2]:  # the newest two: old-2 and old-1
        box.click()
    counter = browser.find_element(By.CSS_SELECTOR, "#bulk-deny .action-counter")
    assert counter.text == "2 of 3 selected"
    browser.find_element(By.ID, "bulk-deny-reason").send_keys("Branches are pruned by the release job.")
    screenshot(browser, f"approver-bulk-deny-{width}")
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "#bulk-deny button"))
    message = browser.find_element(By.CSS_SELECTOR, "ul.messagelist li.success").text
    assert message == "Denied 2 requests: each agent is told your reason."
    statuses = dict(ApprovalRequest.objects.values_list("pk", "status"))
    assert [statuses[request.pk] for request in asked] == [ApprovalStatus.PENDING, "denied", "denied"]
    reasons = set(ApprovalRequest.objects.filter(status="denied").values_list("decision_reason", flat=True))
    assert reasons == {"Branches are pruned by the release job."}
    # The denied rows cannot be ticked again; the one left can.
    assert len(browser.find_elements(By.CSS_SELECTOR, "#result_list input.action-select")) == 1
    screenshot(browser, f"approver-bulk-denied-{width}")


def test_deny_selected_without_a_reason_is_stopped_in_the_browser(browser, live_server, django_user_model, member):
    """Django's changelist form is sent with "novalidate", so the box's "required" alone stops nothing: the
    inbox's script asks the browser to check the box, which focuses it, and the page (with the tick) stays."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from governance.services.approvals import approval_request_create

    tool = approver_and_tool(django_user_model, member, server="github", tool="delete_branch")
    approval_request_create(principal=principal_for_user(member), tool=tool, arguments={"branch": "old"})
    admin_login(browser, live_server.url, "appr", "pw-appr-123", path="/admin/governance/approvalrequest/")
    browser.find_element(By.CSS_SELECTOR, "#result_list input.action-select").click()
    browser.execute_script("window.scoutSamePage = true;")  # gone if the form is sent and a new page loads
    browser.find_element(By.CSS_SELECTOR, "#bulk-deny button").click()
    # The box is focused by the browser's check (a sent form loads a page where nothing is focused).
    WebDriverWait(browser, 30, POLL).until(
        lambda b: b.execute_script("return document.activeElement && document.activeElement.id;") == "bulk-deny-reason"
    )
    assert browser.execute_script("return window.scoutSamePage === true;")
    assert browser.find_element(By.CSS_SELECTOR, "#result_list input.action-select").is_selected()  # the tick kept
    assert not find_now(browser, By.CSS_SELECTOR, "ul.messagelist li")  # no answer from the server
    assert ApprovalRequest.objects.get().status == ApprovalStatus.PENDING


def test_no_select_all_box_over_rows_none_of_which_can_be_ticked(browser, live_server, django_user_model, member):
    """With one request waiting elsewhere, the inbox filtered to decided requests showed the select-all box over rows
    that had no box to tick (it ticked nothing): the header box is there only when a row on the page can be ticked."""
    from selenium.webdriver.common.by import By

    from governance.services.approvals import approval_decide, approval_request_create

    tool = approver_and_tool(django_user_model, member, server="github", tool="delete_branch")
    principal = principal_for_user(member)
    approval_request_create(principal=principal, tool=tool, arguments={"branch": "waiting"})
    decided = approval_request_create(principal=principal, tool=tool, arguments={"branch": "decided"})
    approver = django_user_model.objects.get(username="appr")
    approval_decide(request=decided, approver=approver, approve=False, reason="Pruned by the release job.")
    admin_login(browser, live_server.url, "appr", "pw-appr-123")
    for width in (1280, 800):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/governance/approvalrequest/?status__exact=denied")
        assert len(browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")) == 1
        screenshot(browser, f"approver-inbox-decided-only-{width}")
        assert not find_now(browser, By.CSS_SELECTOR, "#result_list #action-toggle, #result_list .action-select")
        assert not find_now(browser, By.ID, "bulk-deny")
        browser.get(f"{live_server.url}/admin/governance/approvalrequest/")  # the one waiting: it can be ticked
        assert len(browser.find_elements(By.CSS_SELECTOR, "#result_list .action-select")) == 1
        assert len(browser.find_elements(By.CSS_SELECTOR, "#result_list #action-toggle")) == 1  # (800 px: cards)
