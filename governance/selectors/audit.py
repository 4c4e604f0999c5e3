"""The audit trail as a reader may read it: events of their tenants, with the people, groups, agents and tenants
they may not see named as someone (something) in another tenant (Z12)."""

from collections.abc import Iterable

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Group
from django.db.models import Case, CharField, Exists, OuterRef, Q, QuerySet, Value, When
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Cast, Coalesce, Concat, Substr

from ..choices import AuditEventType
from ..constants import OTHER_TENANT, OTHER_TENANT_AGENT, OTHER_TENANT_GROUP, OTHER_TENANT_PERSON
from ..principals import Principal, principal_for_user
from .agents import agent_and_agents_below, agent_shown
from .groups import groups_visible_to_operator
from .people import person_shown, person_visible_to, users_visible_to_operator
from .tenants import tenant_q


def delegation_chain_shown(chain: list[str], *, person_visible: bool) -> list[str]:
    """A delegation chain (``user:alice > agent:planner > ...``) with its person as someone in another tenant and
    its agents (that person's) as an agent in another tenant where the reader may not see the person
    (``person_visible``, from ``person_visible_to``)."""
    if person_visible:
        return list(chain)
    hidden = {"user:": f"user:{OTHER_TENANT_PERSON}", "agent:": f"agent:{OTHER_TENANT_AGENT}"}
    return [next((shown for kind, shown in hidden.items() if link.startswith(kind)), link) for link in chain]


def audit_events_visible_to(*, principal: Principal) -> QuerySet:
    """Audit events a viewer may read: shared ones and those of the tenants ``principal`` acts in, within what its token
    reaches (``_within_token``). Superusers (the platform's operators) read the whole trail in a session. Each is
    annotated with how its person reads (``subject_shown``, ``subject_visible``) and whether the people its payload
    names are visible (read them with ``audit_payload_shown`` and ``delegation_chain_shown``)."""
    from ..models import AuditEvent

    qs = AuditEvent.objects.all()
    if not (principal.token_id is None and getattr(principal.user, "is_superuser", False)):
        qs = qs.filter(tenant_q(principal, "tenant_scope"))
    qs = _within_token(qs, principal)
    # A shared event (a tenant-less token's) may be tenant B's person's, or name them in its payload: named
    # only where the viewer may see them (Z12). Events of no one ("system") name no person.
    viewer = principal.user
    named = {f"payload_{key}": _payload_name(key, prefix) for key, prefix in AUDIT_PAYLOAD_PEOPLE.items()}
    groups = {f"payload_{key}_group": _payload_name(key, prefix) for key, prefix in AUDIT_PAYLOAD_GROUPS.items()}
    return qs.annotate(
        subject_visible=person_visible_to(viewer=viewer, field="user", empty=True),
        subject_shown=person_shown(viewer=viewer, field="user", name="human_subject"),
        payload_tenant=Coalesce(KeyTextTransform("tenant", "payload"), Value(""), output_field=CharField()),
        **named,
        **groups,
    ).annotate(
        agent_shown=agent_shown(name="agent", person_visible="subject_visible"),
        payload_tenant_visible=_tenant_named_visible(viewer=viewer, name="payload_tenant"),
        **{f"{name}_visible": _person_named_visible(viewer=viewer, name=name) for name in named},
        **{f"{name}_visible": _group_named_visible(viewer=viewer, name=name) for name in groups},
    )


def _within_token(qs: QuerySet, principal: Principal) -> QuerySet:
    """``qs`` kept to what ``principal``'s token reaches (Z8, as the approval inbox and the catalog are): an agent's
    token reads what its agent and the agents below it did (their tokens' events), not its person's whole trail; a
    token limited to servers reads those servers' events and its own."""
    from ..models import ApiToken

    if principal.agent_id is not None:
        agents = agent_and_agents_below(principal.agent_id, user=principal.user)
        refs = ApiToken.objects.filter(user=principal.user, agent_id__in=agents).annotate(
            ref=Concat(Value("tok-"), Cast("pk", CharField()), output_field=CharField())
        )
        qs = qs.filter(token_ref__in=refs.values("ref"))
    if principal.server_slugs is not None:
        # And its own events: those of no server (its searches) are its own doing too, not the tenant's others'.
        qs = qs.filter(Q(target_server__in=sorted(principal.server_slugs)) | Q(token_ref=principal.token_ref))
    return qs


# Payload keys of audit events that name a person, with the prefix before the username: whom a token was
# issued for, who holds a grant ("user:alice"), who asked for a decided approval. And those that name a group
# (a grant's holder, "group:ops"). A token's creation also names its agent and tenant (``audit_payload_shown``).
AUDIT_PAYLOAD_PEOPLE = {"for_user": "", "holder": "user:", "requester": ""}
AUDIT_PAYLOAD_GROUPS = {"holder": "group:"}


def _payload_name(key: str, prefix: str):
    text = KeyTextTransform(key, "payload")
    return Substr(text, len(prefix) + 1) if prefix else text


def _person_named_visible(*, viewer: AbstractBaseUser, name: str):
    if getattr(viewer, "is_superuser", False):
        return Value(True)
    people = get_user_model().objects.filter(users_visible_to_operator(user=viewer))
    return Exists(people.filter(**{get_user_model().USERNAME_FIELD: OuterRef(name)}))


def _group_named_visible(*, viewer: AbstractBaseUser, name: str):
    if getattr(viewer, "is_superuser", False):
        return Value(True)
    return Exists(Group.objects.filter(groups_visible_to_operator(user=viewer), name=OuterRef(name)))


def _tenant_named_visible(*, viewer: AbstractBaseUser, name: str):
    """Whether the tenant slug in ``name`` (text) is empty or one of the tenants ``viewer`` acts in."""
    if getattr(viewer, "is_superuser", False):
        return Value(True)
    own = viewer.tenants.values("slug")
    return Case(When(Q(**{name: ""}) | Q(**{f"{name}__in": own}), then=Value(True)), default=Value(False))


def audit_payload_shown(event, *, viewer: AbstractBaseUser) -> dict:
    """An event's payload (of ``audit_events_visible_to``, read by ``viewer``) with the people its reader may not
    see (the token's person, a grant's holder, who asked) as someone in another tenant, a group they may not see as
    a group in another tenant, and a token's agent and tenant as an agent in another tenant and another tenant
    unless both its person and its tenant are the reader's to see. An entitlement change's lists of people and
    groups keep only those the reader may see (a query each, for these rare admin events only)."""
    payload = event.payload
    if not isinstance(payload, dict):
        return payload
    shown = dict(payload)
    for key, prefix in AUDIT_PAYLOAD_PEOPLE.items():
        value = shown.get(key)
        if isinstance(value, str) and value.startswith(prefix) and not getattr(event, f"payload_{key}_visible", False):
            shown[key] = prefix + OTHER_TENANT_PERSON
    for key, prefix in AUDIT_PAYLOAD_GROUPS.items():
        value = shown.get(key)
        visible = getattr(event, f"payload_{key}_group_visible", False)
        if isinstance(value, str) and value.startswith(prefix) and not visible:
            shown[key] = prefix + OTHER_TENANT_GROUP
    tenant_visible = getattr(event, "payload_tenant_visible", False)
    if shown.get("tenant") and not tenant_visible:
        shown["tenant"] = OTHER_TENANT
    if shown.get("agent") and not (tenant_visible and getattr(event, "payload_for_user_visible", False)):
        shown["agent"] = OTHER_TENANT_AGENT
    for key, model, visible in (
        ("users", get_user_model(), users_visible_to_operator),
        ("groups", Group, groups_visible_to_operator),
    ):
        names = shown.get(key)
        if isinstance(names, list) and names and not getattr(viewer, "is_superuser", False):
            field = model.USERNAME_FIELD if model is not Group else "name"
            seen = model.objects.filter(visible(user=viewer), **{f"{field}__in": names}).values_list(field, flat=True)
            seen = set(seen)
            shown[key] = [name for name in names if name in seen]
    return shown


APPROVAL_HISTORY_SHOWN = 20  # asked, decided, used, the call, and a few refused uses


def _approval_events(user: AbstractBaseUser, approval_ids: Iterable[str]) -> QuerySet:
    """The audit events of requests ``user`` already reads (the inbox's, a superuser's), as ``user`` may read the trail
    (``audit_events_visible_to``: their tenants' events and shared ones, another tenant's person as someone in another
    tenant), oldest first: what became of each request without reading the trail itself. An agent's polls while it
    waited are left out."""
    return (
        audit_events_visible_to(principal=principal_for_user(user))
        .filter(approval_ref__in=sorted(set(approval_ids)))
        .exclude(event_type=AuditEventType.APPROVAL_POLLED)
        .order_by("created_at", "id")
    )


def approval_request_history(*, user: AbstractBaseUser, approval_id: str) -> list:
    """The first APPROVAL_HISTORY_SHOWN events of one request (``_approval_events``): asked, decided, used, the call
    that used it and how it ended, a use refused."""
    return list(_approval_events(user, [approval_id])[:APPROVAL_HISTORY_SHOWN])


def approval_calls(*, user: AbstractBaseUser, approval_ids: Iterable[str]) -> dict:
    """{approval id: the call that used it} (its execution event: when, and how it ended) for requests of a list page,
    in one query (``_approval_events``). An approval is used once: one call at most each."""
    calls = _approval_events(user, approval_ids).filter(event_type=AuditEventType.EXECUTION)
    return {event.approval_ref: event for event in calls}
