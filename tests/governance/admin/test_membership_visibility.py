"""A membership taken away in the admin reaches every cached visible set on the next call. The admin's forms
change memberships through the related managers (their m2m signals) and save the person or tenant: no admin or
REST path deletes membership rows with a bare queryset delete, which sends no signal (governance.receivers)."""

import pytest
from django.urls import reverse

from tests.governance.admin.test_user_admin_escalation import _form
from tests.governance.factories import GroupFactory
from tests.governance.selectors.test_visibility import visible

pytestmark = pytest.mark.django_db


def test_a_group_taken_away_in_the_admin_hides_its_tools_on_the_next_call(
    client, superuser, member, grant, server, tool
):
    team = GroupFactory(name="developers")
    member.groups.add(team)
    grant(team, server, "discover")
    assert visible(member) == {tool.tool_id}  # cached under the current version
    client.force_login(superuser)

    response = client.post(reverse("admin:auth_user_change", args=[member.pk]), _form(member, groups=[]))

    assert response.status_code == 302, response.content[:2000]
    assert not member.groups.exists()
    assert visible(member) == set()


def test_a_group_deleted_in_the_admin_hides_its_tools_on_the_next_call(client, superuser, member, grant, server, tool):
    team = GroupFactory(name="developers")
    member.groups.add(team)
    grant(team, server, "discover")
    assert visible(member) == {tool.tool_id}
    client.force_login(superuser)

    response = client.post(reverse("admin:auth_group_delete", args=[team.pk]), {"post": "yes"})

    assert response.status_code == 302
    assert visible(member) == set()
