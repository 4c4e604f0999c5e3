"""The approver inbox at volume: a page of open requests is read in the same number of queries however many rows
it holds (whether each is still usable is checked per requester, not per row), and says which are not."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from governance.models import ServerUserObjectPermission
from governance.services.approvals import approval_request_create

pytestmark = pytest.mark.django_db
INBOX = reverse("admin:governance_approvalrequest_changelist")
LOST = "no longer usable: requester lost access"


@pytest.fixture
def asking(member_token, approver, grant, server):
    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    grant(approver, server, "approve")
    return principal


def _ask(principal, tool, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        approval_request_create(principal=principal, tool=tool, arguments={"n": n})


def test_the_inbox_reads_the_same_number_of_queries_for_more_open_requests(client, approver, asking, mutating_tool):
    client.force_login(approver)
    _ask(asking, mutating_tool, 2)
    client.get(INBOX)  # caches warm, as for every later visit
    with CaptureQueriesContext(connection) as few:
        assert client.get(INBOX).status_code == 200
    _ask(asking, mutating_tool, 8, start=2)
    with CaptureQueriesContext(connection) as more:
        response = client.get(INBOX)
    assert response.status_code == 200 and response.content.decode().count('class="scout-button"') == 10
    assert len(more) == len(few)


def test_every_open_request_of_a_requester_who_lost_access_says_so(client, approver, asking, mutating_tool):
    client.force_login(approver)
    _ask(asking, mutating_tool, 3)
    assert LOST not in client.get(INBOX).content.decode()
    ServerUserObjectPermission.objects.filter(user=asking.user, permission__codename="execute_server").delete()
    assert client.get(INBOX).content.decode().count(LOST) == 3
