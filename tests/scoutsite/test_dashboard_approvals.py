"""The dashboard's pending-approvals count opens: an operator (who may not read the approval inbox) gets the requests
counted, without their arguments, each with who may decide it, and "No one" where no one may."""

import re

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.models import ToolGroupObjectPermission, ToolUserObjectPermission
from governance.principals import principal_for_user
from governance.roles import OPERATORS
from governance.services.approvals import approval_request_create
from governance.services.permissions import permission_grant
from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

pytestmark = pytest.mark.django_db
SECRET_ARGUMENT = "rm -rf the-customer-table"


def _tile_link(html: str) -> str | None:
    found = re.search(r'id="tile-pending-approvals"><a href="([^"]+)"', html)
    return found.group(1) if found else None


def _row(html: str, approval_id: str) -> str:
    found = re.search(rf'<tr data-approval-id="{approval_id}">(.*?)</tr>', html, re.S)
    assert found, approval_id
    return found.group(1)


@pytest.fixture
def operator(django_user_model):
    user = django_user_model.objects.create_user(username="op", is_staff=True)
    user.groups.add(Group.objects.get(name=OPERATORS))
    return user


def _may_call(user, tool) -> None:
    """``user`` may call ``tool``: a request of one who may not waits for no one (no approval of it could run)."""
    granter = get_user_model().objects.filter(username="granter").first() or get_user_model().objects.create_superuser(
        username="granter", email=None, password=None
    )
    for action in ("discover", "execute"):
        permission_grant(actor=granter, target=tool, action=action, holder=user)


def _shown_waiting(client) -> tuple[str, list[str], str]:
    """The dashboard's tile number, the approval ids its list shows, and the list's text, as the logged-in person."""
    dashboard = client.get("/admin/dashboard/").content.decode()
    tile = re.search(r'id="tile-pending-approvals"><a href="[^"]+">(\d+)</a>', dashboard).group(1)
    html = client.get(reverse("dashboard_approvals")).content.decode()
    return tile, re.findall(r'<tr data-approval-id="([^"]+)">', html), " ".join(html.split())


def _ask(user, tool, **arguments):
    _may_call(user, tool)
    arguments = arguments or {"cmd": SECRET_ARGUMENT}
    return approval_request_create(principal=principal_for_user(user), tool=tool, arguments=arguments)


def test_operator_opens_the_count_and_sees_who_may_decide_each_request(client, operator, superuser, member, approver):
    decided = ToolFactory(server=ServerFactory(slug="github"), name="delete_repo", annotations=None)
    orphan = ToolFactory(server=ServerFactory(slug="billing"), name="refund", annotations=None)
    permission_grant(actor=superuser, target=decided.server, action="approve", holder=approver)
    waiting, stuck = _ask(member, decided), _ask(member, orphan)

    client.force_login(operator)
    link = _tile_link(client.get("/admin/dashboard/").content.decode())
    assert link == reverse("dashboard_approvals")
    html = client.get(link).content.decode()
    assert "approver" in _row(html, waiting.approval_id) and "No one" not in _row(html, waiting.approval_id)
    stuck_row = _row(html, stuck.approval_id)
    assert "No one" in stuck_row  # waits until it expires unless the operator grants approve on its server
    assert reverse("admin:catalog_server_change", args=[orphan.server_id]) in stuck_row
    assert SECRET_ARGUMENT not in html  # the arguments are the approvers' to read
    trail = re.search(r'<a class="audit-link" href="([^"]+)"', _row(html, stuck.approval_id)).group(1)
    events = client.get(trail)  # the request's own events in the audit trail, which the operator reads
    assert {event.approval_ref for event in events.context["cl"].result_list} == {stuck.approval_id}


def test_an_approver_in_another_tenant_is_counted_not_named(client, django_user_model, superuser, member, operator):
    tool = ToolFactory(server=ServerFactory(slug="shared"), name="wipe", annotations=None)
    outsider_approver = django_user_model.objects.create_user(username="bob-of-tenant-b", is_staff=True)
    tenant_with("tenant-a", operator)
    tenant_with("tenant-b", outsider_approver)
    permission_grant(actor=superuser, target=tool.server, action="approve", holder=outsider_approver)
    request = _ask(member, tool)

    client.force_login(operator)
    row = _row(client.get(reverse("dashboard_approvals")).content.decode(), request.approval_id)
    assert "bob-of-tenant-b" not in row and "1 in another tenant" in row and "No one" not in row


def test_an_approver_keeps_the_inbox_link_and_others_are_refused(client, django_user_model, superuser, member):
    _ask(member, ToolFactory(server=ServerFactory(slug="github"), name="delete_repo", annotations=None))
    client.force_login(superuser)
    html = client.get("/admin/dashboard/").content.decode()
    assert _tile_link(html) == reverse("admin:governance_approvalrequest_changelist")
    staff = django_user_model.objects.create_user(username="staff", is_staff=True)
    client.force_login(staff)
    assert client.get(reverse("dashboard_approvals")).status_code == 403


def test_the_waiting_list_reads_the_same_number_of_queries_for_more_calls_of_one_tool(
    client, operator, superuser, member, approver
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    tool = ToolFactory(server=ServerFactory(slug="github"), name="delete_repo", annotations=None)
    permission_grant(actor=superuser, target=tool.server, action="approve", holder=approver)
    client.force_login(operator)
    principal = principal_for_user(member)
    _may_call(member, tool)
    for n in range(2):
        approval_request_create(principal=principal, tool=tool, arguments={"n": n})
    client.get(reverse("dashboard_approvals"))  # caches warm, as for every later visit
    with CaptureQueriesContext(connection) as few:
        client.get(reverse("dashboard_approvals"))
    for n in range(2, 10):  # an agent's calls of one tool: every request waits for the same approvers
        last = approval_request_create(principal=principal, tool=tool, arguments={"n": n})
    with CaptureQueriesContext(connection) as more:
        html = client.get(reverse("dashboard_approvals")).content.decode()
    assert html.count("<tr data-approval-id=") == 10 and "approver" in _row(html, last.approval_id)
    assert len(more) == len(few)


def test_the_waiting_list_reads_the_same_number_of_queries_for_more_tools_waiting(
    client, operator, superuser, member, approver
):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    server = ServerFactory(slug="github")
    permission_grant(actor=superuser, target=server, action="approve", holder=approver)
    client.force_login(operator)
    for n in range(2):
        _ask(member, ToolFactory(server=server, name=f"delete_{n}", annotations=None))
    client.get(reverse("dashboard_approvals"))  # caches warm, as for every later visit
    with CaptureQueriesContext(connection) as few:
        client.get(reverse("dashboard_approvals"))
    for n in range(2, 10):
        last = _ask(member, ToolFactory(server=server, name=f"delete_{n}", annotations=None))
    client.get(reverse("dashboard_approvals"))  # the grants made a new visibility version: warm its caches too
    with CaptureQueriesContext(connection) as more:
        html = client.get(reverse("dashboard_approvals")).content.decode()
    assert html.count("<tr data-approval-id=") == 10 and "approver" in _row(html, last.approval_id)
    # The grant holders of every tool on the page are read at once (a page of 100 tools read 100 queries, 4 s at a
    # year's volume on Postgres), and whether each holder may decide once for all of them.
    assert len(more) == len(few)


def test_a_long_backlog_is_shown_a_page_at_a_time_oldest_first(client, operator, member, monkeypatch):
    """Thousands of waiting requests would render (and look up who may decide) all at once: pages of
    ``WAITING_PAGE_SIZE``, oldest first, each saying where it is in the whole backlog."""
    from scoutsite import dashboard

    monkeypatch.setattr(dashboard, "WAITING_PAGE_SIZE", 2)
    tool = ToolFactory(server=ServerFactory(slug="github"), name="delete_repo", annotations=None)
    asked = [_ask(member, tool, n=n) for n in range(5)]
    client.force_login(operator)
    shown = []
    for page, says in ((1, "1–2 of 5 waiting"), (2, "3–4 of 5 waiting"), (3, "5–5 of 5 waiting")):
        html = client.get(reverse("dashboard_approvals"), {"page": page}).content.decode()
        assert says in html
        shown.append(re.findall(r'<tr data-approval-id="([^"]+)">', html))
    assert shown == [[a.approval_id for a in asked[i : i + 2]] for i in (0, 2, 4)]
    first = client.get(reverse("dashboard_approvals")).content.decode()
    assert 'rel="next"' in first and 'rel="prev"' not in first
    assert re.findall(r'<tr data-approval-id="([^"]+)">', first) == shown[0]


def test_requests_that_wait_for_no_one_are_not_counted_as_waiting(
    client, operator, superuser, member, outsider, approver
):
    """The tile counted every pending request: 224 waiting at a year's volume, naming the approver, while that
    approver's inbox said 0 (their requesters had lost access). It now counts what the approvers' badge counts, and
    the list says how many pending requests wait for no one and why."""
    from datetime import timedelta

    from django.utils import timezone

    tool = ToolFactory(server=ServerFactory(slug="github"), name="delete_repo", annotations=None)
    permission_grant(actor=superuser, target=tool.server, action="approve", holder=approver)
    waiting = _ask(member, tool)
    callers = Group.objects.create(name="callers")
    for action in ("discover", "execute"):
        permission_grant(actor=superuser, target=tool, action=action, holder=callers)
    outsider.groups.add(callers)
    lost = approval_request_create(principal=principal_for_user(outsider), tool=tool, arguments={"n": 1})
    # Lost access by a grant deleted outside the service (leaving the group would void the request at once): the
    # request stays pending, unusable, until the sweep.
    ToolGroupObjectPermission.objects.filter(group=callers).delete()
    expired = _ask(member, tool, n=2)
    expired.expires_at = timezone.now() - timedelta(minutes=1)
    expired.save(update_fields=["expires_at"])

    client.force_login(operator)
    tile, shown, text = _shown_waiting(client)
    assert tile == "1" and shown == [waiting.approval_id]
    assert lost.approval_id not in text and expired.approval_id not in text
    assert "2 more pending requests wait for no one" in text

    client.force_login(approver)
    assert "Approvals waiting: <strong>1</strong>" in client.get(reverse("admin:index")).content.decode()


@pytest.mark.parametrize("held_by", ["person", "group"])
@pytest.mark.parametrize("held_on", ["server", "tool"])
def test_a_request_waits_however_its_requester_holds_execute(
    client, django_user_model, operator, superuser, approver, held_by, held_on
):
    """The counts read first, in SQL, only the requests whose requester holds execute (3.5-4 s for the superuser at a
    31k backlog when the rule judged every one): a grant to the person or to their group, on the server or on the
    tool, each keeps the request waiting; without execute it waits for no one, with execute on another tool too."""
    tool = ToolFactory(server=ServerFactory(slug="github"), name="delete_repo", annotations=None)
    other = ToolFactory(server=ServerFactory(slug="wiki"), name="edit", annotations=None)
    permission_grant(actor=superuser, target=tool.server, action="approve", holder=approver)
    asker = django_user_model.objects.create_user(username="asker")
    holder = Group.objects.create(name="callers") if held_by == "group" else asker
    if held_by == "group":
        asker.groups.add(holder)
    for action in ("discover", "execute"):
        permission_grant(actor=superuser, target=tool.server if held_on == "server" else tool, action=action,
                         holder=holder)  # fmt: skip
        permission_grant(actor=superuser, target=other, action=action, holder=asker)
    asked = approval_request_create(principal=principal_for_user(asker), tool=tool, arguments={"n": 1})
    lost = django_user_model.objects.create_user(username="lost")
    for action in ("discover", "execute"):
        permission_grant(actor=superuser, target=tool, action=action, holder=lost)
    unusable = approval_request_create(principal=principal_for_user(lost), tool=tool, arguments={"n": 2})
    ToolUserObjectPermission.objects.filter(user=lost, permission__codename="execute_tool").delete()

    for viewer in (operator, superuser):
        client.force_login(viewer)
        tile, shown, text = _shown_waiting(client)
        assert tile == "1" and shown == [asked.approval_id]
        assert unusable.approval_id not in text and "1 more pending request" in text
    client.force_login(approver)
    assert "Approvals waiting: <strong>1</strong>" in client.get(reverse("admin:index")).content.decode()


@pytest.mark.parametrize("who", ["superuser", "operator"])
def test_no_approval_waiting_is_a_number_not_a_link_to_an_empty_list(client, request, who):
    """adminux25: "0 approvals waiting" led to an inbox or a list with nothing in it, as the search tiles at none
    no longer do."""
    client.force_login(request.getfixturevalue(who))
    html = client.get("/admin/dashboard/").content.decode()
    assert 'id="tile-pending-approvals">0<' in html and _tile_link(html) is None
