"""Every page names itself in the browser's tab as in its heading: the tab of a tool, a server, the dashboard and
an approval to decide reads what the page is about, not "Change tool" or a bare "Operations dashboard"."""

import pytest

from governance.principals import principal_for_user
from governance.services.approvals import approval_request_create
from governance.services.permissions import permission_grant
from tests.governance.factories import ServerFactory, ToolFactory

from .conftest import admin_login, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


DECIDE_TITLE = 'Decide mail::send_email for member: to: "a@b.example"'


def test_page_titles_in_view(browser, live_server, django_user_model, member):
    from selenium.webdriver.common.by import By

    root = django_user_model.objects.create_superuser(username="root", email=None, password="pw-root-123")
    server = ServerFactory(slug="mail")
    tool = ToolFactory(server=server, name="send_email", annotations=None)
    for action in ("discover", "execute"):
        permission_grant(actor=root, target=server, action=action, holder=member)
    pending = approval_request_create(principal=principal_for_user(member), tool=tool, arguments={"to": "a@b.example"})
    admin_login(browser, live_server.url, "root", "pw-root-123")
    pages = {
        f"/admin/catalog/tool/{tool.pk}/change/": "Curate mail::send_email",
        f"/admin/catalog/server/{server.pk}/change/": "Server mail",
        "/admin/governance/auditevent/": "Audit trail — who did what, with which tool, when",
        "/admin/dashboard/": "Operations dashboard",
        # The approver reads the call first (tool, who asked, with what), not the opaque apr_ id (on the page below).
        f"/admin/governance/approvalrequest/{pending.pk}/decide/": DECIDE_TITLE,
    }
    for url, heading in pages.items():
        browser.get(f"{live_server.url}{url}")
        headings = browser.find_elements(By.CSS_SELECTOR, "#content h1")
        assert [h1.text for h1 in headings] == [heading], url
        assert browser.title == f"{heading} | Scout admin", url
        # The heading is on screen when the page opens, not pushed below the fold or under the header.
        top = browser.execute_script("return arguments[0].getBoundingClientRect().top;", headings[0])
        assert 0 < top < 400, url
    screenshot(browser, "title-decide")
