"""The preset roles: each can do its job in the admin and nothing outside it."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.choices import ApprovalStatus
from governance.models import ServerGroupObjectPermission
from governance.roles import APPROVERS, CURATORS, OPERATORS
from governance.services.approvals import approval_request_create
from governance.services.roles import roles_ensure

pytestmark = pytest.mark.django_db


def _staff(django_user_model, username: str, role: str):
    user = django_user_model.objects.create_user(username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def curator(django_user_model):
    return _staff(django_user_model, "cur", CURATORS)


@pytest.fixture
def approver_in_role(django_user_model, grant, server):
    user = _staff(django_user_model, "appr", APPROVERS)
    grant(Group.objects.get(name=APPROVERS), server, "approve")  # what an operator does for the role
    return user


@pytest.fixture
def operator(django_user_model):
    return _staff(django_user_model, "op", OPERATORS)


@pytest.fixture
def pending(member_token, grant, server, mutating_tool):
    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    return approval_request_create(principal=principal, tool=mutating_tool, arguments={"name": "repo"})


def decide(client, request, approve: bool):
    url = reverse("admin:governance_approvalrequest_decide", args=[request.pk])
    return client.post(url, {"reason": "checked", "_approve" if approve else "_deny": "1"})


def test_roles_exist_after_migrate_and_are_restored():
    assert set(Group.objects.filter(name__in=[CURATORS, APPROVERS, OPERATORS]).values_list("name", flat=True)) == {
        CURATORS,
        APPROVERS,
        OPERATORS,
    }
    curators = Group.objects.get(name=CURATORS)
    curators.permissions.clear()
    roles_ensure()
    assert curators.permissions.filter(codename="change_tool").exists()


def test_curator_curates_but_cannot_approve_or_grant(client, curator, tool, pending, server):
    client.force_login(curator)
    page = reverse("admin:catalog_tool_change", args=[tool.pk])
    assert client.get(page).status_code == 200
    response = client.post(
        page,
        {
            "title": "List issues",
            "purpose": "See open issues",
            "entity_types": "",
            "operation_verbs": "",
            "enabled": "on",
            **{
                f"{prefix}-{key}": value
                for prefix in ("aliases", "keywords", "examples", "negative_examples")
                for key, value in (("TOTAL_FORMS", "0"), ("INITIAL_FORMS", "0"))
            },  # fmt: skip
        },
    )
    assert response.status_code == 302, response.content.decode()[:2000]
    tool.refresh_from_db()
    assert tool.purpose == "See open issues"
    assert client.get(reverse("search_workbench")).status_code == 200
    assert decide(client, pending, approve=True).status_code == 403
    assert client.get(reverse("admin:governance_servergroupobjectpermission_add")).status_code == 403
    assert client.get(reverse("admin:catalog_server_add")).status_code == 403
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING


def test_approver_decides_but_cannot_change_grants_or_tools(client, approver_in_role, pending, tool):
    client.force_login(approver_in_role)
    inbox = client.get(reverse("admin:governance_approvalrequest_changelist"))
    assert inbox.status_code == 200 and pending.approval_id in inbox.content.decode()
    assert decide(client, pending, approve=False).status_code == 302
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.DENIED
    assert client.get(reverse("admin:governance_servergroupobjectpermission_add")).status_code == 403
    grant_row = ServerGroupObjectPermission.objects.first()
    delete = reverse("admin:governance_servergroupobjectpermission_delete", args=[grant_row.pk])
    assert client.post(delete, {"post": "yes"}).status_code == 403
    assert client.post(reverse("admin:catalog_tool_change", args=[tool.pk]), {"purpose": "x"}).status_code == 403


def test_operator_registers_and_grants_but_cannot_decide(client, operator, pending, server, superuser):
    client.force_login(operator)
    assert client.get(reverse("admin:catalog_server_add")).status_code == 200
    assert client.get(reverse("admin:governance_servergroupobjectpermission_add")).status_code == 200
    assert decide(client, pending, approve=True).status_code == 403
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING
    tool_page = client.get(reverse("admin:catalog_tool_change", args=[pending.tool.pk]))
    assert tool_page.status_code == 200 and 'name="purpose"' not in tool_page.content.decode()  # read-only
