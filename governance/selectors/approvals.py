"""Approvals: who may approve a tool, the approver inbox, and the notification log of requests."""

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from typing import NamedTuple

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Case, CharField, Count, Exists, F, IntegerField, OuterRef, Q, QuerySet, Value, When
from django.db.models.functions import Concat, StrIndex
from django.utils import timezone

from catalog.cachesafe import cache_call
from catalog.models import Tool

from ..cache import request_memo, visibility_version
from ..choices import ApprovalStatus, NotificationChannel
from ..constants import VISIBILITY_CACHE_TTL_SECONDS
from ..models import ApprovalRequest, NotificationAttempt
from ..principals import Principal, principal_for_user, principals_for_users
from .agents import agent_shown
from .executable import executable_pairs
from .grants import _agent_grant_q, _grant_q, _grants, _held_by_q
from .people import person_shown, person_visible_to, users_visible_to_operator
from .tenants import server_tenant_q, tenant_q
from .tokens import api_tokens_with_membership, principal_for_token
from .tools import tool_executable_by


def approval_requester_may_execute(*, request: ApprovalRequest) -> bool:
    """Whether the requester of ``request`` may still execute its tool, by their grants now (an approval is
    worth nothing once they lost access, however the grant went: admin, shell, group change, policy hold).
    Judged as the token that asked (its tenant and agents; never once it is revoked or expired, as only that
    token may use the approval), or as the person when it came from a session. Read by the visibility
    selector itself (``tool_executable_by``), as deciding needs it: lists use ``approval_requests_usable``."""
    [(_, principal)] = _asking_principals([request])
    if principal is None:
        return False
    return tool_executable_by(principal=principal, tool_pk=request.tool_id)


def approval_requests_usable(*, requests: Iterable[ApprovalRequest], cached: bool = False) -> set[int]:
    """The pks of ``requests`` whose requester may still execute the tool (``approval_requester_may_execute``
    for a page of them), in a fixed number of queries however many principals asked: their tokens, their
    tenants, then the grants among the tools asked (``executable_pairs``: no ORM query built per principal).

    ``cached``: for a list that only shows the answer (never to decide or use a request), answers kept under the
    visibility version, as the visible sets are (``tool_pks_visible_to``)."""
    asking = _asking_principals(requests)
    principals = {place: principal for place, (_, principal) in enumerate(asking)}
    asked_tools = {place: {r.tool_id for r in asked} for place, (asked, _) in enumerate(asking)}
    keys = _usable_keys(principals, asked_tools) if cached else {}
    known = (cache_call("get_many", list(keys.values()), default={}) or {}) if keys else {}
    pairs = {pair for pair, key in keys.items() if known.get(key)}
    unknown = {
        place: {tool for tool in asked_tools[place] if keys.get((place, tool)) not in known}
        for place, principal in principals.items()
        if principal is not None
    }
    found = executable_pairs(principals, unknown)
    if keys:
        fresh = {keys[(place, tool)]: (place, tool) in found for place, tools in unknown.items() for tool in tools}
        cache_call("set_many", fresh, timeout=VISIBILITY_CACHE_TTL_SECONDS)
    pairs |= found
    return {
        request.pk for place, (asked, _) in enumerate(asking) for request in asked if (place, request.tool_id) in pairs
    }


def _asking_principals(requests: Iterable[ApprovalRequest]) -> list[tuple[list[ApprovalRequest], Principal | None]]:
    """``requests`` by who asked (the token, else the person), each with the principal it would act as now (None:
    the token is revoked or expired, or may no longer act), in a fixed number of queries."""
    by_principal: dict[tuple, list[ApprovalRequest]] = defaultdict(list)
    for request in requests:
        key = ("token", request.token_id) if request.token_id is not None else ("user", request.requester_id)
        by_principal[key].append(request)
    token_ids = [pk for kind, pk in by_principal if kind == "token"]
    # A request is usable only with the token that asked (approval_consume): revoked or expired, it never runs.
    live = api_tokens_with_membership().filter(pk__in=token_ids, revoked_at__isnull=True, expires_at__gt=timezone.now())
    tokens = {token.pk: token for token in live} if token_ids else {}
    users = principals_for_users(asked[0].requester for (kind, _), asked in by_principal.items() if kind == "user")
    found = []
    for (kind, pk), asked in by_principal.items():
        if kind == "token":
            found.append((asked, principal_for_token(tokens[pk]) if pk in tokens else None))  # revoked or expired
        else:
            found.append((asked, users.get(pk)))
    return found


def _usable_keys(principals: dict[int, Principal | None], asked_tools: dict[int, set[int]]) -> dict[tuple, str]:
    """Cache keys of (place, tool) answers: the principal's fingerprint under the visibility version (none when
    the version is unknown: nothing is kept)."""
    version = visibility_version()
    if version is None:
        return {}
    keys = {}
    for place, principal in principals.items():
        if principal is None:
            continue
        fingerprint = hashlib.sha256(principal.cache_fingerprint().encode()).hexdigest()[:32]
        for tool in asked_tools[place]:
            keys[(place, tool)] = f"governance:usable:{version}:{fingerprint}:{tool}"
    return keys


def user_can_approve(*, user: AbstractBaseUser, tool: Tool) -> bool:
    """Whether ``user`` holds approve_tool on ``tool`` or approve_server on its server (directly or by group),
    by a grant someone else made.

    Superusers need an explicit grant too: approving is a decision someone else must name them for. A
    tenant's tool only for someone acting in that tenant (Z12)."""
    if not _may_approve_at_all(user):
        return False
    return tools_approvable_by(user=user).filter(pk=tool.pk).exists()


def user_approves_only_by_own_grant(*, user: AbstractBaseUser, tool: Tool) -> bool:
    """Whether ``user`` may not approve ``tool`` only because they made the approve grant themselves."""
    if user_can_approve(user=user, tool=tool) or user is None or user.pk is None:
        return False
    return (
        Tool.objects.filter(pk=tool.pk)
        .filter(_grant_q(user, "approve", own=True))
        .filter(server_tenant_q(principal_for_user(user), "server__"))
        .exists()
    )


def tools_approvable_by(*, user: AbstractBaseUser) -> QuerySet[Tool]:
    """Tools whose calls ``user`` may approve."""
    if not _may_approve_at_all(user):
        return Tool.objects.none()
    return Tool.objects.filter(_approvable_q(user))


def _may_approve_at_all(user: AbstractBaseUser | None) -> bool:
    return user is not None and getattr(user, "is_active", False) and user.pk is not None


def _approvable_q(user: AbstractBaseUser, prefix: str = "") -> Q:
    """THE rule of ``tools_approvable_by`` (for an active user), as a filter on the tool ``prefix`` leads to: an
    approve grant someone else made (``_grant_q``), on a tool of a tenant ``user`` acts in."""
    return _grant_q(user, "approve", prefix=prefix) & server_tenant_q(principal_for_user(user), f"{prefix}server__")


def user_is_approver(*, user: AbstractBaseUser) -> bool:
    """Whether ``user`` holds any approve grant (on a server or a tool, directly or through a group). Read once per
    request (``request_memo``): an admin page's header badge, navigation and inbox checks each ask it."""
    if not _may_approve_at_all(user):
        return False
    memo = request_memo()
    key = ("approver", user.pk)
    if key not in memo:
        memo[key] = any(grants.exists() for grants in _grants(user, "approve"))
    return memo[key]


def approval_requests_for_approver(
    *, user: AbstractBaseUser, principal: Principal | None = None
) -> QuerySet[ApprovalRequest]:
    """The approver inbox: requests for tools ``user`` may approve, of the tenants the approver acts in (the
    request's and its server's, ``tenant_q``), pending first, newest first. ``principal``: the approver's token
    (the API), else the person's session."""
    principal = principal if principal is not None else principal_for_user(user)
    requests = (
        _approvable_requests(user, principal)
        .select_related("requester", "tool", "tool__server", "decided_by", "policy_version")
        .annotate(
            pending_first=Case(
                When(status=ApprovalStatus.PENDING, then=Value(0)), default=Value(1), output_field=IntegerField()
            )
        )
        .order_by("pending_first", "-created_at", "-id")
    )
    return with_approval_people_shown(requests, viewer=user)


def _approvable_requests(user: AbstractBaseUser, principal: Principal) -> QuerySet[ApprovalRequest]:
    """Requests for tools ``user`` may approve, of the tenants ``principal`` acts in (the inbox's rows, unordered),
    within what ``principal`` itself may reach: a token limited to servers decides only for those, a narrowed agent's
    token only for the tools its agents may discover (Z8: human ∩ agent ∩ token)."""
    if not _may_approve_at_all(user):
        return ApprovalRequest.objects.none()
    # On the request's own tool (``prefix``), not ``tool__in`` a tool subquery: Postgres misjudged that subquery's
    # size and joined every approvable tool once per server (~2 s for 10k tools; bench/NOTES-admin-volume.md).
    approvable = _approvable_q(user, "tool__")
    for agent_id in principal.narrowing_agent_ids:
        approvable &= _agent_grant_q(agent_id, "discover", prefix="tool__")
    if principal.server_slugs is not None:
        approvable &= Q(tool__server__slug__in=sorted(principal.server_slugs))
    return ApprovalRequest.objects.filter(approvable).filter(
        tenant_q(principal, "tenant"), server_tenant_q(principal, "tool__server__")
    )


def approval_requests_waiting_for(*, user: AbstractBaseUser) -> list[ApprovalRequest]:
    """The requests waiting for ``user`` to decide, newest first: pending and unexpired in their inbox, not their own
    (someone else decides those), and still usable (``approval_requests_usable``, kept under the visibility version:
    a request whose requester lost access, or whose token was revoked or expired, waits for no one). Every list of
    waiting approvals reads this, and every count ``approval_requests_waiting_count``, so that they agree with the
    inbox's "waiting for you"; both judge usable each group of requests by one asker for one tool (``_usable_groups``),
    as ``approval_requests_usable`` judges a request by exactly those."""
    usable = _usable_groups(user)
    if not usable:
        return []
    rows = (
        _waiting_requests(user)
        .only("token", "tool", "requester", "risk_class", "created_at")  # every pending one is read: no more
        .order_by("-created_at", "-id")
    )
    return [row for row in rows if (row.token_id, row.requester_id, row.tool_id) in usable]


def approval_request_pks_decidable_by(*, user: AbstractBaseUser, pks: Iterable[int]) -> set[int]:
    """Which of ``pks`` (a page of the inbox) ``user`` may decide now: pending, unexpired, in their inbox and not
    their own (usable or not: ``approval_requests_usable`` tells). Reads only these rows."""
    return set(_waiting_requests(user).filter(pk__in=list(pks)).values_list("pk", flat=True))


def approval_requests_waiting_count(*, user: AbstractBaseUser) -> int:
    """``len(approval_requests_waiting_for(user=user))`` without reading each request (the badge on every admin page:
    an approver's backlog may be tens of thousands): counted per who asked (token, else person) and tool. Its groups
    are read once per request (``_usable_groups``)."""
    return sum(_usable_groups(user).values())


def approval_waiting_forget() -> None:
    """Forget what this request read of who waits for whom (``_usable_groups``): a request opened, decided or expired
    changes it, and such a write does not empty ``request_memo`` as one changing who sees what does."""
    memo = request_memo()
    for key in [key for key in memo if isinstance(key, tuple) and key[0] == "waiting"]:
        del memo[key]


class _AskedFor(NamedTuple):
    """A group of requests as ``approval_requests_usable`` reads one (who asked, for which tool), without building an
    ApprovalRequest for each of thousands of groups (~0.2 ms each, most of the badge's time at 5k groups)."""

    pk: int
    token_id: int | None
    requester_id: int
    tool_id: int
    requester: AbstractBaseUser | None


def _usable_groups(user: AbstractBaseUser) -> dict[tuple, int]:
    """``approval_request_groups_usable`` of the requests waiting for ``user``, without its grant pre-filter: under the
    approve rule's subqueries Postgres ran the four EXISTS per waiting request (the approver's badge 1.3-2.2 s -> 4-5 s
    at a 31k backlog, bench/admin_volume.py). Read once per request (``request_memo``): the inbox's badge, its action
    checks and its "waiting for you" filter each asked it (3-4 times a page); a write that opens, decides or expires
    a request forgets it (``approval_waiting_forget``)."""
    memo = request_memo()
    key = ("waiting", user.pk)
    if key not in memo:
        memo[key] = _groups_usable(_waiting_requests(user))
    return memo[key]


def approval_request_groups_usable(*, requests: QuerySet[ApprovalRequest]) -> dict[tuple, int]:
    """(token pk, requester pk, tool pk) -> how many of ``requests`` that asker made for that tool, for the groups
    whose principal may still execute the tool (``approval_requests_usable``, which judges each request by exactly
    those three, answers kept under the visibility version: for lists and counts, never to decide or use one).

    Only requests whose requester holds execute on the tool or its server are judged (what the rule asks first, read
    in SQL): the rule over every request of a 31k backlog read 10k-tool IN lists (2.5 s), or 31k kept answers (2 s)."""
    return _groups_usable(requests.filter(_held_by_q("execute", person="requester", prefix="tool__")))


def _groups_usable(requests: QuerySet[ApprovalRequest]) -> dict[tuple, int]:
    """``approval_request_groups_usable`` of ``requests`` as given: one grouped query, then one stand-in request per
    group, never a model instance per request."""
    groups = list(requests.order_by().values_list("token_id", "requester_id", "tool_id").annotate(n=Count("pk")))
    people = get_user_model().objects.in_bulk({requester for token, requester, _, _ in groups if token is None})
    standins = [
        _AskedFor(place, token, requester, tool, people[requester] if token is None else None)
        for place, (token, requester, tool, _) in enumerate(groups)
    ]
    usable = approval_requests_usable(requests=standins, cached=True)
    return {(token, requester, tool): n for place, (token, requester, tool, n) in enumerate(groups) if place in usable}


def _waiting_requests(user: AbstractBaseUser) -> QuerySet[ApprovalRequest]:
    """Pending, unexpired requests in ``user``'s inbox that are not their own (usable or not)."""
    return (
        _approvable_requests(user, principal_for_user(user))
        .filter(status=ApprovalStatus.PENDING, expires_at__gt=timezone.now())
        .exclude(requester=user)
        .exclude(token__created_by=user)  # a token they issued for someone else: the call may be theirs
    )


def with_approval_people_shown(requests: QuerySet[ApprovalRequest], *, viewer: AbstractBaseUser) -> QuerySet:
    """``requests`` annotated with who asked and who decided as ``viewer`` may read them (``requester_shown``,
    ``decided_by_shown``, ``requester_visible``): a tenant-less request of tenant B's person is in every
    tenant's inbox, but its requester is someone in another tenant there (Z12)."""
    username = f"__{get_user_model().USERNAME_FIELD}"
    return requests.annotate(
        requester_visible=person_visible_to(viewer=viewer, field="requester"),
        requester_shown=person_shown(viewer=viewer, field="requester", name=f"requester{username}"),
        decided_by_shown=person_shown(viewer=viewer, field="decided_by", name=f"decided_by{username}"),
    ).annotate(agent_shown=agent_shown(name="agent", person_visible="requester_visible"))


def notification_attempts_visible_to(*, user: AbstractBaseUser) -> QuerySet[NotificationAttempt]:
    """The notification log an admin reads (Z12): attempts for requests of shared tenants and the user's, on
    servers they may manage (``tenant_q``, as the inbox and the audit trail). Superusers read every attempt,
    also those whose request is gone (its tenant unknown)."""
    attempts = NotificationAttempt.objects.all()
    if getattr(user, "is_superuser", False):
        return attempts
    principal = principal_for_user(user)
    # An e-mail to another tenant's approvers (a shared request reaches every tenant's, one mail per tenant set)
    # names them by address: left out, as those people are.
    hidden = get_user_model().objects.exclude(users_visible_to_operator(user=user)).exclude(email="")
    listed = Concat(Value(", "), OuterRef("target"), Value(", "), output_field=CharField())
    address = Concat(Value(", "), F("email"), Value(", "), output_field=CharField())
    to_hidden = hidden.annotate(at=StrIndex(listed, address)).filter(at__gt=0)
    return (
        attempts.filter(approval__isnull=False)
        .filter(tenant_q(principal, "approval__tenant"), server_tenant_q(principal, "approval__tool__server__"))
        .exclude(Q(channel=NotificationChannel.EMAIL) & Q(Exists(to_hidden)))
    )
