"""An operator reclassifies a tool in a real browser and records why: the note written beside the risk class is
on the policy page after saving, and the audit trail's policy change carries it."""

import pytest

from .conftest import admin_login, click_through, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

NOTE = "Wipes the shared drive: critical after the March incident"


def test_an_operator_raises_a_tools_risk_and_says_why(browser, live_server, django_user_model):
    from django.contrib.auth.models import Group
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from catalog.definitions import normalize_listing
    from catalog.services.apply import catalog_apply_listing
    from governance.models import ToolPolicy
    from governance.roles import OPERATORS
    from tests.governance.factories import ServerFactory

    tool = {"name": "tidy_workspace", "description": "Lists temporary files.", "annotations": {"readOnlyHint": True}}
    definitions, _, names = normalize_listing([tool], max_bytes=100_000)
    catalog_apply_listing(server=ServerFactory(slug="files"), definitions=definitions, keep_names=names)
    policy = ToolPolicy.objects.get(tool__tool_id="files::tidy_workspace")
    operator = django_user_model.objects.create_user(username="op", password="pw-op-123456", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))

    admin_login(
        browser, live_server.url, "op", "pw-op-123456", path=f"/admin/governance/toolpolicy/{policy.pk}/change/"
    )
    Select(browser.find_element(By.NAME, "risk_class")).select_by_visible_text("Critical")
    note = browser.find_element(By.NAME, "classification_note")
    note.clear()
    note.send_keys(NOTE)
    screenshot(browser, "tool-policy-note")
    click_through(browser, browser.find_element(By.NAME, "_continue"))
    assert browser.find_element(By.NAME, "classification_note").get_attribute("value") == NOTE
    assert Select(browser.find_element(By.NAME, "risk_class")).first_selected_option.text == "Critical"

    browser.get(f"{live_server.url}/admin/governance/auditevent/?event_type__exact=policy.changed")
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "#result_list tbody tr a"))
    assert NOTE in browser.find_element(By.ID, "content").text
