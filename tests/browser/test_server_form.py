"""The server form in a real browser: only the chosen transport's fields show, a value left in a field of the
transport given up is dropped when the form is sent (not refused), the slug follows the name, and a long command
shows whole."""

import pytest

from .conftest import admin_login, click_through, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
LONG_COMMAND = "/home/scout/.local/share/uv/tools/mcp-server-time/bin/mcp-server-time"


def _shown(browser, name: str) -> bool:
    from selenium.webdriver.common.by import By

    return browser.find_element(By.CSS_SELECTOR, f".form-row.field-{name}").is_displayed()


def test_only_the_chosen_transports_fields_show(browser, live_server, django_user_model, settings):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from catalog.models import Server

    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["mcp.example.com"]  # the HTTP server registered below

    django_user_model.objects.create_superuser(username="root", email=None, password="pw-root-123")
    admin_login(browser, live_server.url, "root", "pw-root-123", path="/admin/catalog/server/add/")
    assert _shown(browser, "command") and _shown(browser, "args")  # stdio, the default
    assert not _shown(browser, "url") and not _shown(browser, "header_env") and not _shown(browser, "base_url")
    openapi_section = browser.find_element(By.CSS_SELECTOR, ".form-row.field-base_url").find_element(
        By.XPATH, "ancestor::fieldset"
    )
    assert not openapi_section.is_displayed()  # a section with nothing to show is hidden too

    browser.find_element(By.NAME, "name").send_keys("Clock Two")
    assert browser.find_element(By.NAME, "slug").get_attribute("value") == "clock-two"
    command = browser.find_element(By.NAME, "command")
    command.send_keys(LONG_COMMAND)  # then the operator changes their mind
    # The whole path in view at 1280 px: Django's 20em box cut it ("/home/scout/.local/share/uv/tools/mc").
    assert browser.execute_script("return arguments[0].scrollWidth <= arguments[0].clientWidth", command)
    transport = Select(browser.find_element(By.NAME, "transport"))
    transport.select_by_value("http")
    assert _shown(browser, "url") and _shown(browser, "header_env")
    assert not _shown(browser, "command") and not openapi_section.is_displayed()
    screenshot(browser, "server-form-http")
    transport.select_by_value("openapi")
    assert openapi_section.is_displayed() and not _shown(browser, "url")
    transport.select_by_value("imported")
    assert not any(_shown(browser, name) for name in ("command", "url", "base_url"))
    transport.select_by_value("http")
    browser.find_element(By.NAME, "url").send_keys("https://mcp.example.com/mcp")
    click_through(browser, browser.find_element(By.NAME, "_save"))
    assert "/admin/catalog/server/add/" not in browser.current_url, browser.find_element(By.ID, "content").text
    server = Server.objects.get(slug="clock-two")
    assert (server.transport, server.url, server.command) == ("http", "https://mcp.example.com/mcp", "")


def test_a_tenant_operator_opens_the_form_on_a_transport_they_can_add(browser, live_server, django_user_model):
    """A tenant's operator may not name a command: the form opened on stdio, whose fields they could not fill
    (read-only), and was refused on save. It opens on Streamable HTTP with its URL to fill, and offers no stdio."""
    from django.contrib.auth.models import Group
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from governance.roles import OPERATORS
    from tests.governance.factories import tenant_with

    operator = django_user_model.objects.create_user(username="op-a", password="pw-op-a-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    tenant_with("tenant-a", operator)
    admin_login(browser, live_server.url, "op-a", "pw-op-a-123", path="/admin/catalog/server/add/")
    transport = Select(browser.find_element(By.NAME, "transport"))
    assert transport.first_selected_option.get_attribute("value") == "http"
    assert "stdio" not in [option.get_attribute("value") for option in transport.options]
    assert _shown(browser, "url") and browser.find_element(By.NAME, "url").is_enabled()
    assert not _shown(browser, "command")
    screenshot(browser, "server-form-tenant-operator")


def test_a_tenant_operator_registers_a_server_without_choosing_their_only_tenant(
    browser, live_server, django_user_model, settings
):
    """The tenant section offered an empty choice first: an operator of one tenant who filled the form and saved read
    "Please submit at least 1 form" and "This field is required" under it (a year's volume, tenant-0's operator).
    Their only tenant is now the choice, and the server saves as theirs; an operator of several tenants who leaves it
    empty is told what to choose."""
    from django.contrib.auth.models import Group
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from catalog.models import Server
    from governance.roles import OPERATORS
    from tests.governance.factories import tenant_with

    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["mcp.example.com"]
    operator = django_user_model.objects.create_user(username="op-a", password="pw-op-a-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    tenant = tenant_with("tenant-a", operator)
    tenant_with("tenant-b")  # another tenant, not theirs: not offered
    admin_login(browser, live_server.url, "op-a", "pw-op-a-123", path="/admin/catalog/server/add/")
    choice = Select(browser.find_element(By.NAME, "tenancy-0-tenant"))
    assert [option.text for option in choice.options] == ["tenant-a"]
    browser.find_element(By.NAME, "name").send_keys("Payments")
    browser.find_element(By.NAME, "url").send_keys("https://mcp.example.com/mcp")
    click_through(browser, browser.find_element(By.NAME, "_save"))
    assert "/admin/catalog/server/add/" not in browser.current_url, browser.find_element(By.ID, "content").text
    screenshot(browser, "server-form-tenant-operator-saved")
    assert Server.objects.get(slug="payments").tenancy.tenant == tenant

    tenant_with("tenant-c", operator)  # now of two tenants: they choose, and are told so when they do not
    browser.get(f"{live_server.url}/admin/catalog/server/add/")
    assert [option.text for option in Select(browser.find_element(By.NAME, "tenancy-0-tenant")).options] == [
        "---------", "tenant-a", "tenant-c",
    ]  # fmt: skip
    browser.find_element(By.NAME, "name").send_keys("Ledger")
    browser.find_element(By.NAME, "url").send_keys("https://mcp.example.com/ledger")
    click_through(browser, browser.find_element(By.NAME, "_save"))
    assert "Choose the tenant this server is for" in browser.find_element(By.ID, "content").text
    assert "Please submit at least" not in browser.find_element(By.ID, "content").text
    screenshot(browser, "server-form-tenant-operator-choose")
    assert not Server.objects.filter(slug="ledger").exists()


def test_an_operator_tests_an_openapi_service_and_reads_what_to_do_about_a_bad_document(
    browser, live_server, django_user_model, settings
):
    """Test connection on a new OpenAPI service lists the operations a sync would import and those it would refuse
    (it answered 500); a document that is not OpenAPI says what is wrong and what to do about it."""
    from django.contrib.auth.models import Group
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from catalog.models import Server
    from governance.roles import OPERATORS
    from tests.catalog.openapi_service import start_pet_service

    from .conftest import wait_for

    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["127.0.0.1/32"]
    service, _ = start_pet_service()
    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    admin_login(browser, live_server.url, "op", "pw-op-123")

    def test_connection(**fields: str) -> None:
        browser.get(f"{live_server.url}/admin/catalog/server/add/")
        browser.find_element(By.NAME, "name").send_keys("Pets")
        Select(browser.find_element(By.NAME, "transport")).select_by_value("openapi")
        for name, value in fields.items():
            browser.find_element(By.NAME, name).send_keys(value)
        click_through(browser, browser.find_element(By.ID, "test-connection"))

    try:
        test_connection(base_url=service.url, openapi_url=f"{service.url}/openapi.json")
        assert "tools found" in wait_for(browser, "#test-connection-count").text
        assert "pets::listPets" in browser.find_element(By.ID, "test-connection-tools").text
        assert "subscribe" in browser.find_element(By.ID, "test-connection-refused").text  # with why it is refused
        screenshot(browser, "operator-openapi-test-connection")
        test_connection(base_url=service.url, openapi_document='{"swagger": "2.0", "paths": {}}')
        assert "Swagger / OpenAPI 2.0 is not supported" in wait_for(browser, "#test-connection-error").text
        assert "Correct the OpenAPI document" in browser.find_element(By.ID, "test-connection-next").text
        screenshot(browser, "operator-openapi-test-connection-error")
    finally:
        service.stop()
    assert not Server.objects.exists()


@pytest.mark.parametrize("width", [1280, 800])
def test_the_alternatives_chooser_fits_the_form(browser, live_server, django_user_model, width):
    """At 800 px beside the navigation, the alternatives' "Chosen" box ran past the form's right edge (cut off, its
    remove arrow out of reach): between 768 and 1024 px the two boxes now stack, as Django does on a phone."""
    from django.contrib.auth.models import Group
    from selenium.webdriver.common.by import By

    from governance.roles import OPERATORS
    from tests.governance.factories import ServerFactory

    ServerFactory(slug="github-enterprise-production")
    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    admin_login(browser, live_server.url, "op", "pw-op-123")
    browser.set_window_size(width, 900)
    browser.get(f"{live_server.url}/admin/catalog/server/add/")
    row = browser.find_element(By.CSS_SELECTOR, ".form-row.field-alternatives")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", row)
    screenshot(browser, f"operator-server-form-alternatives-{width}")
    content = browser.find_element(By.ID, "content").rect
    for part in (".selector-available", ".selector-chosen", ".selector-chooser"):
        box = row.find_element(By.CSS_SELECTOR, part).rect
        assert box["x"] + box["width"] <= content["x"] + content["width"], (width, part)
