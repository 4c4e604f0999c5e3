"""People an admin may see (Z12), and expressions naming a row's person as its reader may read them."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Case, CharField, Exists, F, OuterRef, Q, Value, When

from ..constants import OTHER_TENANT_PERSON
from ..principals import principal_for_user
from .tenants import tenant_q


def users_visible_to_operator(*, user: AbstractBaseUser) -> Q:
    """People an admin may see and pick (the user list, the people of grant, token, agent and tenant forms):
    all for a superuser, else ``tenant_q`` on their tenants: people in no tenant (shared) and members of one of
    the admin's tenants. An operator of tenant A never sees tenant B's usernames. A filter on the user model."""
    if getattr(user, "is_superuser", False):
        return Q()
    people = get_user_model().objects.filter(tenant_q(principal_for_user(user), "tenants"))
    return Q(pk__in=people.values("pk"))  # a subquery: a member of several tenants is one row


def person_visible_to(*, viewer: AbstractBaseUser, field: str, empty: bool = False):
    """A boolean expression over rows naming a person in ``field`` (a user foreign key or id): whether ``viewer``
    may see that person (``users_visible_to_operator``), one subquery for a whole list, never a query per row.
    ``empty``: the answer for rows without a person."""
    if getattr(viewer, "is_superuser", False):
        return Value(True)
    people = get_user_model().objects.filter(users_visible_to_operator(user=viewer))
    visible = Exists(people.filter(pk=OuterRef(field)))
    return Q(**{f"{field}__isnull": True}) | Q(visible) if empty else visible


def person_shown(*, viewer: AbstractBaseUser, field: str, name: str):
    """An expression: the person in ``field`` by ``name`` (a lookup: ``requester__username``, ``human_subject``)
    where ``viewer`` may see them, "someone in another tenant" otherwise; a row without a person keeps ``name``."""
    if getattr(viewer, "is_superuser", False):
        return F(name)
    return Case(
        When(person_visible_to(viewer=viewer, field=field, empty=True), then=F(name)),
        default=Value(OTHER_TENANT_PERSON),
        output_field=CharField(),
    )
