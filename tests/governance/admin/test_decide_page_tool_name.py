"""A tool's name is its upstream's choice (sync refuses only control characters and "::"; a direction override is
held, and a curator may accept it): the approver's inbox and decide page showed it raw, so a right-to-left override in
it reversed the rest of the title (who asked, the arguments) as a browser lays it out. Over a live server, the
approver's own session: each such character is shown escaped, as in the arguments (redteam40)."""

import httpx
import pytest

from governance.services.approvals import approval_request_create
from tests.api.conftest import session_cookies
from tests.governance.factories import ToolFactory

pytestmark = pytest.mark.django_db(transaction=True)
NAME = "delete_repo\u202eexe.txt"


def test_a_direction_override_in_a_tool_name_reaches_the_approver_escaped(
    live_server, member_token, approver, grant, server
):
    _, _, principal = member_token
    tool = ToolFactory(server=server, name=NAME, upstream_title="Delete\u2067 repo", annotations=None)
    grant(principal.user, server, "discover", "execute")
    grant(approver, server, "approve")
    request = approval_request_create(principal=principal, tool=tool, arguments={"name": "repo"})
    with httpx.Client(base_url=live_server.url, cookies=session_cookies(approver)) as client:
        inbox = client.get("/admin/governance/approvalrequest/")
        page = client.get(f"/admin/governance/approvalrequest/{request.pk}/change/")
    assert inbox.status_code == 200 and page.status_code == 200
    for html in (inbox.text, page.text):
        assert "\u202e" not in html and "\u2067" not in html
    assert "<title>Decide github::delete_repo\\u202eexe.txt for member:" in page.text
    assert "Delete\\u2067 repo" in page.text
    assert "delete_<wbr>repo\\u202eexe.txt" in inbox.text
