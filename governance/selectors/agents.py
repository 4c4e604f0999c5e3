"""Agents an admin may see (Z12), an agent's agents below it, and an expression naming a row's agent as its reader may
read it."""

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Case, CharField, F, Q, Value, When

from ..constants import OTHER_TENANT_AGENT
from ..models import Agent
from ..principals import principal_for_user
from .people import users_visible_to_operator
from .tenants import tenant_q


def agents_visible_to_operator(*, user: AbstractBaseUser) -> Q:
    """Agents an admin may see and pick (the agent list, its page and lookups, a token's agent): all for a
    superuser, else agents in no tenant or one of the admin's tenants (``tenant_q``) whose person the admin may
    see: a tenant-less agent of tenant B's person is tenant B's business (Z12). A filter on Agent."""
    if getattr(user, "is_superuser", False):
        return Q()
    people = get_user_model().objects.filter(users_visible_to_operator(user=user))
    return tenant_q(principal_for_user(user), "tenant") & Q(user__in=people.values("pk"))


def agent_shown(*, name: str, person_visible: str):
    """An expression over rows (approval requests, audit events) naming an agent in the text field ``name``: the
    name where the row's person is visible (``person_visible``: the name of a boolean annotation made with
    ``person_visible_to``), "an agent in another tenant" otherwise; an empty name stays empty. A row's agent is
    its person's, in the row's tenant (a token's agent acts for the token's user, in the token's tenant), so a
    reader who reads the row may see the agent exactly when they may see the person."""
    return Case(
        When(Q(**{name: ""}), then=Value("")),
        When(Q(**{person_visible: True}), then=F(name)),
        default=Value(OTHER_TENANT_AGENT),
        output_field=CharField(),
    )


def agent_and_agents_below(agent_id: int, *, user: AbstractBaseUser) -> set[int]:
    """``agent_id`` and the agents below it (``user``'s: an agent's parent is of the same user)."""
    parents = dict(Agent.objects.filter(user=user).values_list("pk", "parent_id"))
    found, frontier = {agent_id}, {agent_id}
    while frontier:
        frontier = {pk for pk, parent in parents.items() if parent in frontier and pk not in found}
        found |= frontier
    return found
