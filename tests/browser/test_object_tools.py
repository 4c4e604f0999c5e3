"""The buttons at the top right of a change page (History, Sync now, Search preview, …) sit on their own line under
the page's title at 1280 px: never over a long title, never off the page."""

import pytest

from tests.governance.factories import ServerFactory, ToolFactory

from .conftest import admin_login, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
OVERLAP = """
const a = arguments[0].getBoundingClientRect(), b = arguments[1].getBoundingClientRect();
return !(a.right <= b.left || b.right <= a.left || a.bottom <= b.top || b.bottom <= a.top);
"""


def test_object_tools_never_cover_the_title(browser, live_server, django_user_model):
    from selenium.webdriver.common.by import By

    django_user_model.objects.create_superuser(username="root", email=None, password="pw-root-123")
    server = ServerFactory(slug="github-enterprise-production-eu-west-1", transport="streamable_http",
                           url="https://mcp.example.com/mcp")  # fmt: skip
    tool = ToolFactory(server=server, name="list_repository_collaborators_with_their_permissions")
    admin_login(browser, live_server.url, "root", "pw-root-123")
    for url, name in (
        (f"/admin/catalog/tool/{tool.pk}/change/", "object-tools-tool"),
        (f"/admin/catalog/server/{server.pk}/change/", "object-tools-server"),
    ):
        browser.get(f"{live_server.url}{url}")
        title = browser.find_element(By.CSS_SELECTOR, "#content h1")
        tools = browser.find_element(By.CSS_SELECTOR, ".object-tools")
        screenshot(browser, name)
        assert not browser.execute_script(OVERLAP, title, tools), f"{url}: the buttons cover the title"
        assert tools.rect["y"] >= title.rect["y"] + title.rect["height"], f"{url}: the buttons are not under the title"
        width = browser.execute_script("return document.documentElement.clientWidth;")
        for item in tools.find_elements(By.TAG_NAME, "li"):
            assert item.rect["x"] >= 0 and item.rect["x"] + item.rect["width"] <= width, item.text
