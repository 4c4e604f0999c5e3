"""An operator of tenant A in a real browser: a shared server's page lists the group access of tenant A's and
nobody's groups, and the group autocomplete (select2, asking the admin as the browser does) offers them, never
tenant B's group; the agent list shows no agent of tenant B's person."""

import pytest
from django.contrib.auth.models import Group, Permission

from governance.models import ServerGroupObjectPermission
from tests.governance.factories import agent_of

from .conftest import OPERATOR_A, POLL, admin_login, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture
def shared_server(shared_server_tenants):
    world = shared_server_tenants(tenant_a=("alice-a",), tenant_b=("bob-b",))
    alice, bob = world.people["alice-a"], world.people["bob-b"]
    discover = Permission.objects.get(codename="discover_server")
    for name, member in (("alpha-team", alice), ("bravo-team", bob)):
        group = Group.objects.create(name=name)
        group.user_set.add(member)
        ServerGroupObjectPermission.objects.create(group=group, permission=discover, content_object=world.server)
    Group.objects.create(name="new-team")  # nobody's yet
    agent_of(alice, "alpha-agent")
    agent_of(bob, "bravo-agent")  # in no tenant, but tenant B's person's
    return world.server


def test_an_operator_is_offered_no_other_tenants_group(browser, live_server, shared_server):
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    admin_login(browser, live_server.url, *OPERATOR_A, path=f"/admin/catalog/server/{shared_server.pk}/change/")
    page = browser.find_element("tag name", "body").text
    assert "alpha-team" in page and "bravo-team" not in page
    browser.execute_script("document.getElementById('group_grants-group').scrollIntoView()")
    browser.find_element(By.CSS_SELECTOR, "#group_grants-1 .select2-selection").click()
    browser.find_element(By.CSS_SELECTOR, ".select2-container--open .select2-search__field").send_keys("team")
    # The list is drawn again when each AJAX answer lands: an option read as it is replaced is read again.
    options = WebDriverWait(browser, 30, POLL, ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda driver: [
            option.text
            for option in driver.find_elements(By.CSS_SELECTOR, ".select2-results__option")
            if option.text.endswith("team")
        ]
    )
    screenshot(browser, "tenant-a-operator-group-autocomplete")
    assert sorted(options) == ["alpha-team", "new-team"]

    browser.get(f"{live_server.url}/admin/governance/agent/")
    page = browser.find_element("tag name", "body").text
    assert "alpha-agent" in page and "bravo-agent" not in page
