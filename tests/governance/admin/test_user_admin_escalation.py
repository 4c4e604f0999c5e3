"""The user admin never lets staff raise anyone above themselves: whoever holds ``auth.change_user`` without being
a superuser changes, resets the password of, or deletes no superuser (nor anyone holding permissions they lack),
never sets ``is_superuser``, and grants only the permissions and groups they hold themselves. Before, such a
person could reset a superuser's password, make themselves superuser, or grant themselves any permission."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from governance.roles import CURATORS, OPERATORS

pytestmark = pytest.mark.django_db


def _perm(label: str) -> Permission:
    app_label, codename = label.split(".")
    return Permission.objects.get(content_type__app_label=app_label, codename=codename)


@pytest.fixture
def people_admin(django_user_model):
    """ann: staff, an Operator, and may change and delete people (no role grants that; someone did)."""
    ann = django_user_model.objects.create_user(username="ann", is_staff=True)
    ann.groups.add(Group.objects.get(name=OPERATORS))
    ann.user_permissions.add(_perm("auth.change_user"), _perm("auth.delete_user"))
    return ann


def _form(user, **changes) -> dict:
    """The user change form as posted, with ``user``'s current values and ``changes``."""
    data = {
        "username": user.username,
        "first_name": user.first_name,
        "last_name": user.last_name,
        "email": user.email,
        "date_joined_0": user.date_joined.strftime("%Y-%m-%d"),
        "date_joined_1": user.date_joined.strftime("%H:%M:%S"),
        "groups": [str(pk) for pk in user.groups.values_list("pk", flat=True)],
        "user_permissions": [str(pk) for pk in user.user_permissions.values_list("pk", flat=True)],
    }
    for flag in ("is_active", "is_staff", "is_superuser"):
        if getattr(user, flag):
            data[flag] = "on"
    data.update(changes)
    return {key: value for key, value in data.items() if value is not None}


def test_staff_cannot_change_reset_or_delete_a_superuser(client, people_admin, superuser):
    superuser.set_password("root-secret")
    superuser.save()
    client.force_login(people_admin)

    page = client.get(reverse("admin:auth_user_change", args=[superuser.pk]))
    changed = client.post(reverse("admin:auth_user_change", args=[superuser.pk]), _form(superuser, email="x@e.org"))
    reset = client.post(
        reverse("admin:auth_user_password_change", args=[superuser.pk]),
        {"password1": "taken-over-9", "password2": "taken-over-9", "usable_password": "true"},
    )
    deleted = client.post(reverse("admin:auth_user_delete", args=[superuser.pk]), {"post": "yes"})

    assert page.status_code == 200 and 'name="_save"' not in page.content.decode()  # read only
    assert (changed.status_code, reset.status_code, deleted.status_code) == (403, 403, 403)
    superuser.refresh_from_db()
    assert superuser.check_password("root-secret") and superuser.email == ""


def test_staff_cannot_make_anyone_superuser_nor_grant_what_they_do_not_hold(client, people_admin, member):
    client.force_login(people_admin)
    not_held = _perm("auth.add_user")
    curators = Group.objects.get(name=CURATORS)

    for person in (member, people_admin):
        client.post(reverse("admin:auth_user_change", args=[person.pk]), _form(person, is_superuser="on"))
        person.refresh_from_db()
        assert not person.is_superuser
        answer = client.post(
            reverse("admin:auth_user_change", args=[person.pk]),
            _form(person, user_permissions=[str(not_held.pk)], groups=[str(curators.pk)]),
        )
        assert answer.status_code == 200  # the form again, each choice refused
        assert not person.user_permissions.filter(pk=not_held.pk).exists()
        assert not person.groups.filter(pk=curators.pk).exists()


def test_staff_grant_what_they_hold_and_keep_what_they_may_not_offer(client, people_admin, member):
    """A permission or group the admin holds may be granted; one the person holds and the admin does not (not
    offered) is kept on save, not silently removed."""
    view_user, operators = _perm("auth.view_user"), Group.objects.get(name=OPERATORS)
    team = Group.objects.create(name="team")  # no permissions, the admin not in it
    member.groups.add(team)
    client.force_login(people_admin)

    answer = client.post(
        reverse("admin:auth_user_change", args=[member.pk]),
        _form(member, user_permissions=[str(view_user.pk)], groups=[str(operators.pk)]),
    )

    assert answer.status_code == 302
    assert set(member.user_permissions.all()) == {view_user}
    assert set(member.groups.all()) == {operators, team}


def test_staff_cannot_change_someone_holding_permissions_they_lack(client, people_admin, django_user_model):
    curator = django_user_model.objects.create_user(username="cleo", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(people_admin)

    reset = client.post(
        reverse("admin:auth_user_password_change", args=[curator.pk]),
        {"password1": "taken-over-9", "password2": "taken-over-9", "usable_password": "true"},
    )

    assert reset.status_code == 403
    curator.refresh_from_db()
    assert not curator.has_usable_password()


def test_a_superuser_grants_anything(client, superuser, member):
    client.force_login(superuser)
    add_user, curators = _perm("auth.add_user"), Group.objects.get(name=CURATORS)

    answer = client.post(
        reverse("admin:auth_user_change", args=[member.pk]),
        _form(member, is_superuser="on", user_permissions=[str(add_user.pk)], groups=[str(curators.pk)]),
    )

    assert answer.status_code == 302
    member.refresh_from_db()
    assert member.is_superuser and set(member.user_permissions.all()) == {add_user}
    assert set(member.groups.all()) == {curators}


def test_staff_add_to_a_group_only_permissions_they_hold(client, people_admin):
    """A group's permissions go to its members: adding any permission to one's own group was the same escalation.
    A permission the group holds and the admin does not is kept on save."""
    people_admin.user_permissions.add(_perm("auth.change_group"))
    operators = Group.objects.get(name=OPERATORS)
    before = [str(pk) for pk in operators.permissions.values_list("pk", flat=True)]
    team = Group.objects.create(name="team")
    team.permissions.add(_perm("auth.add_user"))
    client.force_login(people_admin)

    refused = client.post(
        reverse("admin:auth_group_change", args=[operators.pk]),
        {"name": OPERATORS, "permissions": [*before, str(_perm("auth.add_user").pk)]},
    )
    granted = client.post(
        reverse("admin:auth_group_change", args=[team.pk]),
        {"name": "team", "permissions": [str(_perm("auth.delete_user").pk)]},
    )

    assert refused.status_code == 200  # the form again, the choice refused
    assert not operators.permissions.filter(codename="add_user").exists()
    assert granted.status_code == 302
    assert set(team.permissions.all()) == {_perm("auth.add_user"), _perm("auth.delete_user")}
