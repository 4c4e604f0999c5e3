"""Separation of duties: nobody decides on authority they gave themselves.

Rule: a non-superuser cannot grant ``approve`` to themselves or to a group they belong to (service, server form,
tool form, grant pages), and an ``approve`` grant never counts for the person who made it (a superuser's grant to
themselves, or a group joined after granting it to that group)."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.core.exceptions import ValidationError
from django.urls import reverse

from governance.choices import ApprovalStatus
from governance.models import ServerUserObjectPermission, ToolGroupObjectPermission, ToolUserObjectPermission
from governance.roles import APPROVERS, OPERATORS
from governance.selectors import approval_requests_for_approver, user_can_approve, user_is_approver
from governance.services.approvals import ApprovalError, approval_decide, approval_request_create
from governance.services.notifications import approvers_for
from governance.services.permissions import permission_grant

pytestmark = pytest.mark.django_db


def _staff(django_user_model, username: str, *groups: str):
    user = django_user_model.objects.create_user(username=username, is_staff=True)
    user.groups.add(*Group.objects.filter(name__in=groups))
    return user


@pytest.fixture
def operator(django_user_model):
    return _staff(django_user_model, "op", OPERATORS)


@pytest.fixture
def other_operator(django_user_model):
    return _staff(django_user_model, "op2", OPERATORS)


@pytest.fixture
def pending(member_token, grant, server, mutating_tool):
    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    return approval_request_create(principal=principal, tool=mutating_tool, arguments={"name": "repo"})


def test_an_operator_cannot_grant_approve_to_themselves(operator, server, tool):
    for target in (server, tool):
        with pytest.raises(ValidationError) as refused:
            permission_grant(actor=operator, target=target, action="approve", holder=operator)
        assert refused.value.code == "self_grant"
    assert not ServerUserObjectPermission.objects.filter(user=operator).exists()
    permission_grant(actor=operator, target=server, action="discover", holder=operator)  # other rights: fine
    assert ServerUserObjectPermission.objects.filter(user=operator, permission__codename="discover_server").exists()


def test_nor_to_a_group_they_belong_to(django_user_model, server):
    operator = _staff(django_user_model, "op-approver", OPERATORS, APPROVERS)
    with pytest.raises(ValidationError):
        permission_grant(actor=operator, target=server, action="approve", holder=Group.objects.get(name=APPROVERS))


def test_approve_granted_by_another_operator_lets_them_decide(operator, other_operator, server, pending):
    grant = permission_grant(actor=other_operator, target=server, action="approve", holder=operator)
    assert grant.granted_by == other_operator
    assert user_can_approve(user=operator, tool=pending.tool) and user_is_approver(user=operator)
    approval_decide(request=pending, approver=operator, approve=True, reason="")
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.APPROVED


def test_a_superusers_own_approve_grant_does_not_let_them_decide(superuser, other_operator, server, pending):
    permission_grant(actor=superuser, target=server, action="approve", holder=superuser)  # allowed to make
    assert not user_can_approve(user=superuser, tool=pending.tool) and not user_is_approver(user=superuser)
    with pytest.raises(ApprovalError) as refused:
        approval_decide(request=pending, approver=superuser, approve=True, reason="")
    assert refused.value.code == "forbidden" and "a grant you made yourself" in str(refused.value)
    assert superuser not in approvers_for(request=pending)  # not e-mailed either
    permission_grant(actor=other_operator, target=server, action="approve", holder=superuser)  # another's grant
    approval_decide(request=pending, approver=superuser, approve=False, reason="not now")
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.DENIED


def test_joining_a_group_after_granting_it_approve_does_not_count(operator, superuser, django_user_model, pending):
    reviewers = Group.objects.create(name="Reviewers")
    colleague = _staff(django_user_model, "colleague", "Reviewers")
    permission_grant(actor=operator, target=pending.tool, action="approve", holder=reviewers)  # not a member: fine
    operator.groups.add(reviewers)  # later, by someone else
    assert not user_can_approve(user=operator, tool=pending.tool)
    assert not approval_requests_for_approver(user=operator).exists()
    assert user_can_approve(user=colleague, tool=pending.tool)
    assert [user.username for user in approvers_for(request=pending)] == ["colleague"]


def _approve_permission(model: str) -> str:
    return str(Permission.objects.get(codename=f"approve_{model}").pk)


def test_the_grant_page_refuses_a_self_grant_of_approve(client, operator, server):
    client.force_login(operator)
    response = client.post(
        reverse("admin:governance_serveruserobjectpermission_add"),
        {"user": operator.pk, "permission": _approve_permission("server"), "content_object": server.pk},
    )
    assert response.status_code == 200 and "another operator must grant it" in response.content.decode()
    assert not ServerUserObjectPermission.objects.exists()


def _tool_form(**extra) -> dict:
    data = {}
    for prefix in ("group_grants", "user_grants", "aliases", "keywords", "examples", "negative_examples"):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    data.update(extra)
    return data


def test_an_operator_grants_access_on_the_tool_form_but_not_approve_to_themselves(client, operator, member, tool):
    client.force_login(operator)
    page = reverse("admin:catalog_tool_change", args=[tool.pk])
    html = client.get(page).content.decode()
    assert "Access to this tool" in html and 'name="purpose"' not in html  # access yes, curation read-only
    refused = client.post(
        page,
        _tool_form(
            **{
                "user_grants-TOTAL_FORMS": "1",
                "user_grants-0-user": operator.pk,
                "user_grants-0-permission": _approve_permission("tool"),
            }  # fmt: skip
        ),
    )
    assert refused.status_code == 200 and "another operator must grant it" in refused.content.decode()
    assert not ToolUserObjectPermission.objects.exists()

    discover = Permission.objects.get(codename="discover_tool").pk
    saved = client.post(
        page,
        _tool_form(
            **{
                "user_grants-TOTAL_FORMS": "1",
                "user_grants-0-user": member.pk,
                "user_grants-0-permission": discover,
                "purpose": "an operator cannot curate",
            }  # fmt: skip
        ),
    )
    assert saved.status_code == 302, saved.content.decode()[:2000]
    grant = ToolUserObjectPermission.objects.get(content_object=tool, user=member)
    assert grant.permission.codename == "discover_tool" and grant.granted_by == operator
    tool.refresh_from_db()
    assert tool.purpose != "an operator cannot curate"


def test_a_curator_without_grant_rights_sees_no_access_rows(client, django_user_model, tool):
    from governance.roles import CURATORS

    curator = _staff(django_user_model, "cur", CURATORS)
    client.force_login(curator)
    html = client.get(reverse("admin:catalog_tool_change", args=[tool.pk])).content.decode()
    assert 'name="purpose"' in html and "Access to this tool" not in html
    assert not ToolGroupObjectPermission.objects.exists()
