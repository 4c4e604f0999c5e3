"""Approvals bound to the exact call: principal, tool, definition hash, argument digest, policy version.

Errors: ArgumentsNotCanonical (arguments cannot be hashed), ApprovalError (with a ``code``) for anything
wrong with an approval at decision or use. Messages never echo argument values.
"""

import functools
import hashlib
import json
import math
import re
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import OperationalError, connection, transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from catalog.choices import ServerStatus
from catalog.models import Server, Tool
from governance.choices import ApprovalStatus, AuditEventType, AuditOutcome
from governance.constants import (
    APPROVAL_ID_BYTES,
    APPROVAL_ID_PREFIX,
    APPROVAL_PENDING_TTL_SECONDS,
    MAX_ARGUMENT_BYTES,
    MAX_ARGUMENT_DEPTH,
    delegation_max_chain,
)
from governance.models import Agent, ApiToken, ApprovalRequest, ToolPolicy
from governance.principals import Principal, principal_for_user
from governance.selectors import (
    approval_requester_may_execute,
    approval_requests_for_approver,
    approval_requests_usable,
    approval_waiting_forget,
    policy_version_current,
    principal_as_now,
    server_tenant_id,
    tool_executable_by,
    user_approves_only_by_own_grant,
    with_approval_people_shown,
)
from governance.services.audit import audit_event_build, audit_record, audit_record_many
from governance.services.permissions import rows_lock
from governance.services.policy import tool_policy_ensure

MAX_REASON_CHARS = 2000
MAX_DENIAL_REASON_CHARS = 500  # what an agent is told of a denial: the approver's words, on one line
SQLITE_LOCK_RETRIES = 20
EXPIRE_PAGE = 2000  # open requests judged at a time by the expiry sweep
# Server states that pass: one failed sync (Degraded) or a health check that went unanswered (Unavailable) hides a
# server's tools from clients until it recovers, but takes no one's access away. Its tools' open requests wait for it
# (still expiring by time) instead of being voided as if their requesters had lost access.
SERVER_STATUSES_THAT_PASS = (ServerStatus.DEGRADED, ServerStatus.UNAVAILABLE)
APPROVAL_ID_RE = re.compile(re.escape(APPROVAL_ID_PREFIX) + r"[A-Za-z0-9_-]{16,36}")


AGENT_DECIDES = "agent_decides"
AGENT_DECIDES_MESSAGE = (
    "A token acting for an agent decides no request: approving or denying a call is its person's act, in the admin "
    "or with a token of their own (no agent)"
)


class ArgumentsNotCanonical(ValueError):
    """The arguments cannot be turned into canonical JSON (NaN/Infinity, non-JSON types, non-string keys,
    too deep, too large). Nothing was executed."""


class ApprovalError(Exception):
    """An approval cannot be decided or used. ``code`` is stable for callers:
    unknown, not_pending, not_approved, denied, already_approved, used, expired, arguments_mismatch,
    definition_changed, policy_changed, self_approval, forbidden, agent_decides, reason_required, too_many_pending.
    ``details``: facts
    a caller may pass on as structured data (the approval_id; for a denial also who denied it, when, and their reason);
    ``request``: the request it is about, when the caller may be told more of it (still pending: where and until when
    an approver decides)."""

    def __init__(
        self, code: str, message: str, details: dict[str, str] | None = None, request: ApprovalRequest | None = None
    ) -> None:
        super().__init__(message)
        self.code = code
        self.details = details or {}
        self.request = request


@dataclass(frozen=True)
class ApprovalPolicy:
    """What the policy in force says about calls to one tool."""

    needs_approval: bool
    ttl: timedelta
    risk_class: str
    operation_class: str
    policy_version: int


# --- canonical arguments ------------------------------------------------------------------------


def _check_json_value(value: Any) -> None:
    """Iterative walk (no recursion): reject non-JSON types, non-finite floats, non-string keys, deep nesting."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_ARGUMENT_DEPTH:
            raise ArgumentsNotCanonical(f"arguments are nested deeper than {MAX_ARGUMENT_DEPTH} levels")
        if node is None or isinstance(node, bool | str | int):
            continue
        if isinstance(node, float):
            if not math.isfinite(node):
                raise ArgumentsNotCanonical("arguments contain NaN or Infinity, which JSON cannot represent")
            continue
        if isinstance(node, dict):
            for key, child in node.items():
                if not isinstance(key, str):
                    raise ArgumentsNotCanonical("argument object keys must be strings")
                stack.append((child, depth + 1))
            continue
        if isinstance(node, list | tuple):
            stack.extend((child, depth + 1) for child in node)
            continue
        raise ArgumentsNotCanonical(f"arguments contain a {type(node).__name__}, which is not a JSON type")


def arguments_canonical(arguments: Any) -> str:
    """Canonical JSON of the call arguments (a JSON object): sorted keys, no whitespace, UTF-8 kept.

    Raises ArgumentsNotCanonical."""
    if not isinstance(arguments, dict):
        raise ArgumentsNotCanonical("arguments must be a JSON object")
    _check_json_value(arguments)
    text = json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    if len(text.encode("utf-8")) > MAX_ARGUMENT_BYTES:
        raise ArgumentsNotCanonical(f"arguments are larger than {MAX_ARGUMENT_BYTES} bytes")
    return text


def arguments_digest(arguments: Any) -> str:
    """SHA-256 (hex) of the canonical JSON of ``arguments``. Raises ArgumentsNotCanonical."""
    return hashlib.sha256(arguments_canonical(arguments).encode("utf-8")).hexdigest()


# --- policy -------------------------------------------------------------------------------------


def policy_for_tool(tool: Tool) -> ApprovalPolicy:
    """Whether calls to ``tool`` need an approval and how long one stays valid.

    Needs approval when its risk class says so for every call, or the tool is mutating (anything but a
    "read" operation class) and its risk class requires approval for mutating calls. A tool without
    annotations defaults to mutating/high, so it needs approval until an admin classifies it."""
    # Read fresh: a cached tool.policy may predate an admin's reclassification or a risk-class change.
    policy = ToolPolicy.objects.select_related("risk_class").filter(tool_id=tool.pk).first()
    if policy is None:
        policy = tool_policy_ensure(tool=tool)
    risk = policy.risk_class
    return ApprovalPolicy(
        needs_approval=policy.needs_approval,
        ttl=risk.approval_ttl,
        risk_class=risk.name,
        operation_class=policy.operation_class,
        policy_version=policy_version_current().number,
    )


# --- lifecycle ----------------------------------------------------------------------------------


def _new_approval_id() -> str:
    return APPROVAL_ID_PREFIX + secrets.token_urlsafe(APPROVAL_ID_BYTES)


def _same_call(*, principal: Principal, tool: Tool, digest: str) -> QuerySet[ApprovalRequest]:
    """Every request for this exact call by this principal (user, token, agent): the one key by which a repeat
    finds the pending request it duplicates or the denial it repeats."""
    return ApprovalRequest.objects.filter(
        requester=principal.user, token_id=principal.token_id, agent=principal.agent, tool=tool, arguments_digest=digest
    )


def _recent_denial(*, principal: Principal, tool: Tool, digest: str) -> ApprovalRequest | None:
    """The newest denial of this exact call within SCOUT_APPROVAL_DENIAL_WINDOW seconds (0: none is kept)."""
    window = settings.SCOUT_APPROVAL_DENIAL_WINDOW
    if window <= 0:
        return None
    since = timezone.now() - timedelta(seconds=window)
    denials = _same_call(principal=principal, tool=tool, digest=digest).filter(
        status=ApprovalStatus.DENIED, decided_at__gt=since
    )
    return denials.select_related("decided_by").order_by("-decided_at").first()


def approval_request_create(
    *, principal: Principal, tool: Tool, arguments: Any, trace_id: str = "", call_id: str = ""
) -> ApprovalRequest:
    """Ask for approval of one exact call. Returns the pending request; an identical pending request by the
    same principal is returned instead of a duplicate. The same call denied within SCOUT_APPROVAL_DENIAL_WINDOW
    is refused with that denial (audited, no new request: a looping agent cannot spam approvers), and one approved
    and not yet used is named instead of asked again ("already_approved", with its approval_id in ``details``);
    a call given an existing pending or approved request is audited as ``approval.polled``. A person with
    SCOUT_APPROVAL_MAX_PENDING_PER_PERSON requests waiting is refused a new one (audited, "too_many_pending").
    ``call_id``: the gateway call asking, put in the payload of each event written here (its execution event carries
    it too): a re-run of that call's check after a lost commit acknowledgement finds by it that its first run landed.
    Raises ArgumentsNotCanonical, ApprovalError ("denied", "already_approved", "forbidden", "too_many_pending")."""
    canonical = arguments_canonical(arguments)
    mark = {"call_id": call_id} if call_id else {}
    digest = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    if len(principal.delegation_chain) > delegation_max_chain():
        raise ApprovalError("forbidden", f"delegation chain is longer than {delegation_max_chain()}")
    policy = policy_for_tool(tool)
    version = policy_version_current()
    denial = _recent_denial(principal=principal, tool=tool, digest=digest)
    if denial is not None:  # audited in the caller's transaction, as a refused use is
        error = _denial_error(denial, viewer=principal.user)
        _audit_rejection(principal=principal, tool=tool, request=denial, error=error, asked_again=True, mark=mark)
        raise error
    now = timezone.now()
    with transaction.atomic():
        # The person's row is locked while their waiting requests are counted: two new requests for two tools at
        # once cannot both pass SCOUT_APPROVAL_MAX_PENDING_PER_PERSON (Postgres; as the live-token cap does). First,
        # as a keyed call has it already (its idempotency cap): the tool's row second, so no two calls wait on each
        # other's lock.
        get_user_model().objects.select_for_update().filter(pk=principal.user.pk).exists()
        # And the tool's row while its open requests are looked up and one is opened (until the caller's
        # transaction ends): a call sent twice at once (a re-sent stream) opens one request, not two an approver
        # could both approve and the call then run twice (T17).
        Tool.objects.select_for_update().filter(pk=tool.pk).values_list("pk", flat=True).first()
        existing_call = _same_call(principal=principal, tool=tool, digest=digest).filter(
            tool_definition_hash=tool.definition_hash, policy_version=version, expires_at__gt=now
        )
        existing = (
            existing_call.filter(status=ApprovalStatus.PENDING).first()
            or existing_call.filter(status=ApprovalStatus.APPROVED).first()
        )
        if existing is None and not _pending_limit_reached(principal, now):
            request = ApprovalRequest.objects.create(
                approval_id=_new_approval_id(),
                requester=principal.user,
                token_id=principal.token_id,
                token_ref=principal.token_ref,
                agent=principal.agent,
                tenant_id=principal.tenant_id if principal.tenant_id is not None else server_tenant_id(tool.server),
                delegation_chain=list(principal.delegation_chain),
                tool=tool,
                tool_definition_hash=tool.definition_hash,
                arguments_json=canonical,
                arguments_digest=digest,
                policy_version=version,
                risk_class=policy.risk_class,
                operation_class=policy.operation_class,
                expires_at=now + timedelta(seconds=APPROVAL_PENDING_TTL_SECONDS),
                trace_id=(trace_id or "")[:200],
            )
            approval_waiting_forget()
            audit_record(
                event_type=AuditEventType.APPROVAL_REQUESTED,
                principal=principal,
                tool=tool,
                approval=request,
                outcome=AuditOutcome.PENDING,
                trace_id=trace_id,
                payload={"arguments_digest": digest, "risk_class": policy.risk_class, **mark},
            )
            # After commit, in a worker: an approver is told without the agent's call waiting on mail or a webhook.
            from governance.tasks import notify_approval_requested

            notify_approval_requested.delay_on_commit(request.pk)
            return request
    if existing is None:  # audited in the caller's transaction, as a refused use is
        limit = settings.SCOUT_APPROVAL_MAX_PENDING_PER_PERSON
        error = ApprovalError(
            "too_many_pending",
            f"You already have {limit} approval requests waiting for an approver; no new one is opened until one of "
            "them is decided or expires",
        )
        _audit_rejection(principal=principal, tool=tool, request=None, error=error, mark=mark)
        raise error
    # An open request for this call: audited in the caller's transaction, as a poll with the approval_id is.
    _audit_asked_about(principal=principal, tool=tool, request=existing, mark=mark)
    if existing.status == ApprovalStatus.APPROVED:  # asking again would put it back in an approver's inbox
        raise ApprovalError(
            "already_approved",
            f"This exact call is already approved (approval_id {existing.approval_id}) and not yet used",
            details={"approval_id": existing.approval_id},
        )
    return existing


def _pending_limit_reached(principal: Principal, now) -> bool:
    """Whether the person already has SCOUT_APPROVAL_MAX_PENDING_PER_PERSON requests waiting (their every token and
    agent counted together: minting more does not open more). Each new request reaches every approver's inbox, mail
    and webhook, so an agent varying its arguments flooded them at the /mcp rate (T13). Count it with the person's
    row locked."""
    limit = settings.SCOUT_APPROVAL_MAX_PENDING_PER_PERSON
    if not limit:
        return False
    waiting = ApprovalRequest.objects.filter(
        requester=principal.user, status=ApprovalStatus.PENDING, expires_at__gt=now
    )
    return waiting.count() >= limit


def approval_get(*, approval_id: object) -> ApprovalRequest:
    """The request with this public id. Raises ApprovalError("unknown") for anything else."""
    if not isinstance(approval_id, str) or not APPROVAL_ID_RE.fullmatch(approval_id):
        raise ApprovalError("unknown", "Unknown approval id")
    request = ApprovalRequest.objects.select_related("tool", "tool__server", "policy_version").filter(
        approval_id=approval_id
    )
    found = request.first()
    if found is None or found.approval_id != approval_id:
        raise ApprovalError("unknown", "Unknown approval id")
    return found


def approval_decide(
    *,
    request: ApprovalRequest,
    approver: AbstractBaseUser,
    approve: bool,
    reason: str,
    principal: Principal | None = None,
) -> ApprovalRequest:
    """Approve or deny a pending request. The approver needs approve_tool/approve_server on the tool and
    must not be the requester (nor appear in the request's delegation chain). A denial needs a reason.
    An approval stays usable for the risk class's TTL. ``principal``: how the approver decided, for the audit
    trail (an API token's principal names the token and agent); None for the admin. A token acting for an agent decides
    nothing. Raises ApprovalError (forbidden, self_approval, agent_decides, reason_required, not_pending, expired)."""
    reason = (reason or "").strip()[:MAX_REASON_CHARS]
    if _asked_by(request, approver):
        raise ApprovalError("self_approval", "You cannot decide on your own request")
    if not approval_requests_for_approver(user=approver, principal=principal).filter(pk=request.pk).exists():
        # Not in the inbox of the approver as they decide (their token's tenant, servers and agents): no approve
        # grant someone else made on the tool, another tenant's request (Z12), or beyond the token (Z8).
        if user_approves_only_by_own_grant(user=approver, tool=request.tool):
            raise ApprovalError(
                "forbidden", "Your approve right here is a grant you made yourself: another person must grant it"
            )
        raise ApprovalError("forbidden", "You may not approve calls to this tool")
    if principal is not None and principal.agent_id is not None:
        # An approval is a person's check on an agent's call: an agent deciding one is an LLM judging arguments another
        # agent wrote (one prompt injection away from both), and four eyes become none (redteam37, T5/Z9). Its token
        # may read the inbox (to tell its person what waits); the decision is the person's.
        raise ApprovalError(AGENT_DECIDES, AGENT_DECIDES_MESSAGE)
    if not approve and not reason:
        raise ApprovalError("reason_required", "A denial needs a reason")
    if approve and request.status == ApprovalStatus.PENDING and not approval_requester_may_execute(request=request):
        if _server_passing(request):
            raise ApprovalError(
                "server_not_serving",
                "The tool's server is not serving its tools now (its last sync failed or it stopped answering): "
                "the request stays pending; approve it once the server is back",
            )
        # However the access went (a grant deleted in a shell, a group change), approving it would be for nothing.
        _expire(request, reason="requester_lost_access")
        raise ApprovalError("requester_lost_access", "The requester may no longer call this tool; the request is void")
    now = timezone.now()
    ttl = policy_for_tool(request.tool).ttl
    new_status = ApprovalStatus.APPROVED if approve else ApprovalStatus.DENIED
    with transaction.atomic():
        _decider_still_approves(request=request, approver=approver, principal=principal)
        # Conditional update: of two concurrent decisions exactly one changes the row.
        changed = ApprovalRequest.objects.filter(
            pk=request.pk, status=ApprovalStatus.PENDING, expires_at__gt=now
        ).update(
            status=new_status,
            decided_by=approver,
            decided_at=now,
            decision_reason=reason,
            expires_at=now + ttl if approve else F("expires_at"),
        )
        approval_waiting_forget()  # this page's badge counts it no more
        request.refresh_from_db()
        if not changed:
            if request.status == ApprovalStatus.PENDING:
                _expire(request, reason="timed_out")
                raise ApprovalError("expired", "The request expired before a decision")
            raise ApprovalError("not_pending", f"The request is already {request.get_status_display().lower()}")
        audit_record(
            event_type=AuditEventType.APPROVAL_APPROVED if approve else AuditEventType.APPROVAL_DENIED,
            principal=principal or principal_for_user(approver, via="admin"),
            tool=request.tool,
            approval=request,
            outcome=AuditOutcome.SUCCESS,
            payload={"requester": request.requester.get_username(), "reason": reason},
        )
    return request


def approval_deny_many(
    *,
    requests: QuerySet[ApprovalRequest],
    approver: AbstractBaseUser,
    reason: str,
    principal: Principal | None = None,
) -> dict[str, str]:
    """Deny each of ``requests`` with one reason, each by ``approval_decide`` (its checks, its own transaction, its
    own audit event): one refused request (decided meanwhile, not this approver's to decide) leaves the others
    denied. ``principal``: how the approver decides, as for ``approval_decide``. Returns each request's approval id
    and how it ended: ``denied``, or the ApprovalError code of a refusal (not_pending, expired, forbidden,
    self_approval). Raises ApprovalError("reason_required") before denying any when the reason is blank."""
    if not (reason or "").strip():
        raise ApprovalError("reason_required", "A denial needs a reason")
    outcomes: dict[str, str] = {}
    for request in requests.select_related("tool", "token", "requester").order_by("pk"):
        try:
            approval_decide(request=request, approver=approver, approve=False, reason=reason, principal=principal)
        except ApprovalError as exc:
            outcomes[request.approval_id] = exc.code
        else:
            outcomes[request.approval_id] = "denied"
    return outcomes


def _decider_still_approves(
    *, request: ApprovalRequest, approver: AbstractBaseUser, principal: Principal | None
) -> None:
    """Check the decider's right again, in the deciding transaction, with their row (and their token's) locked until
    it ends: their approve right was checked when the decision began, and a revocation committed before the decision
    was written (the grant, a group's grant: ``permission_revoke`` locks its holders' rows; the token; the person
    deactivated; a group or tenant left or deleted, an agent's grant deleted: governance.receivers locks the people
    or the agent; the tool's server moved to another tenant: its row) was followed by a decision of someone without
    the right (T5/Z6). Now the revocation either came first and is seen here, or waits for this decision. Raises
    ApprovalError("forbidden")."""
    # The tool's server first: moved to a tenant the decider does not act in, its tool is no longer theirs to decide
    # (Z12), and a move locks that row (governance.receivers). First, as the admin's server form locks it (its save)
    # before the people whose grants its access sections revoke: the same order, no deadlock.
    rows_lock(Server.objects.filter(pk=request.tool.server_id))
    # NO KEY UPDATE: rows that merely point at the person or token (an audit event) are still written meanwhile.
    person = get_user_model().objects.select_for_update(no_key=True).filter(pk=approver.pk, is_active=True).first()
    if principal is not None and principal.token_id is not None:
        ApiToken.objects.select_for_update(no_key=True).filter(pk=principal.token_id).exists()
        # And the person's agents: an agent's own grants narrow what its token decides (one deleted, or the agent
        # narrowed, writes or locks its row; permissions.rows_lock).
        rows_lock(Agent.objects.filter(user_id=approver.pk))
        principal = principal_as_now(principal)
        if principal is None:  # the token was revoked or expired, or may no longer act
            person = None
    if (
        person is None
        or not approval_requests_for_approver(user=person, principal=principal).filter(pk=request.pk).exists()
    ):
        raise ApprovalError("forbidden", "You may not approve calls to this tool")


def _asked_by(request: ApprovalRequest, person: AbstractBaseUser) -> bool:
    """Whether ``person`` asked for ``request``: its requester, in its delegation chain, or whoever issued the token
    it came with for someone else (a superuser, who was shown its raw value: the call may be theirs, T5)."""
    if person.pk == request.requester_id or f"user:{person.get_username()}" in request.delegation_chain:
        return True
    return request.token_id is not None and request.token.created_by_id == person.pk


def _server_passing(request: ApprovalRequest) -> bool:
    """Whether ``request``'s tool is out of reach only because its server is not serving for now
    (``SERVER_STATUSES_THAT_PASS``)."""
    return Server.objects.filter(tools=request.tool_id, status__in=SERVER_STATUSES_THAT_PASS).exists()


def _expire(request: ApprovalRequest, *, reason: str) -> None:
    approvals_expire(ApprovalRequest.objects.filter(pk=request.pk), reason=reason)
    request.refresh_from_db()


def approvals_expire(requests: QuerySet[ApprovalRequest], *, reason: str) -> int:
    """Expire those of ``requests`` still pending or approved, each with an ``approval.expired`` audit event saying
    why (``reason``: ``timed_out`` or ``requester_lost_access``) in the same transaction: a request leaving the
    inbox unseen left no trace of why. Returns how many. The rows are locked first: a decision or use at the same
    moment either came first (no longer open: no event) or waits. A bounded number of queries, however many."""
    with transaction.atomic():
        rows = list(
            requests.filter(status__in=[ApprovalStatus.PENDING, ApprovalStatus.APPROVED])
            .select_for_update(of=("self",))
            .select_related("requester", "policy_version", "tool__server__tenancy")
            .order_by("pk")
        )
        ApprovalRequest.objects.filter(pk__in=[row.pk for row in rows]).update(status=ApprovalStatus.EXPIRED)
        approval_waiting_forget()
        events = [
            audit_event_build(
                event_type=AuditEventType.APPROVAL_EXPIRED,
                principal=None,  # the system's doing: "system" on the record, the requester in the payload
                outcome=AuditOutcome.SUCCESS,
                tool=row.tool,
                server=row.tool.server,
                approval=row,
                policy_version=row.policy_version.number,
                payload={"reason": reason, "status": row.status, "requester": row.requester.get_username()},
            )
            for row in rows
        ]
        audit_record_many(events=events)
    return len(rows)


def approval_expire_stale() -> int:
    """Mark pending and approved requests past their expiry, or whose requester lost access to the tool, as
    expired, each with its ``approval.expired`` event (``approvals_expire``). Returns how many.

    ``permission_revoke`` voids requests at once; this sweep catches every other way access goes (a grant
    deleted outside the service, a group membership or entitlement change, a hold), so the approver inbox
    does not keep showing approvals that can never be used. Use re-checks access regardless. A request whose
    tool's server is only not serving for now (``SERVER_STATUSES_THAT_PASS``) is left open: it is judged again
    once the server is back."""
    open_requests = ApprovalRequest.objects.filter(status__in=[ApprovalStatus.PENDING, ApprovalStatus.APPROVED])
    expired = 0
    timed_out = open_requests.filter(expires_at__lte=timezone.now()).order_by("pk").values_list("pk", flat=True)
    # A page at a time: each page leaves the open set (expired, or decided meanwhile), so this ends.
    while page := list(timed_out[:EXPIRE_PAGE]):
        expired += approvals_expire(ApprovalRequest.objects.filter(pk__in=page), reason="timed_out")
    return expired + _expire_lost_access(open_requests)


def approvals_void_for_people(*, user_pks: Iterable[int]) -> int:
    """Expire the pending and approved requests of these people that they may no longer use (they left a group, a
    tenant or an entitlement, one was deleted, or an agent of theirs was narrowed), each audited as the sweep does, at
    once: left to the sweep (every five minutes), an approval outlived a membership taken and given back meanwhile,
    and ran (redteam54, Z6). Returns how many."""
    pks = list(user_pks)
    return _expire_lost_access(_open_requests().filter(requester_id__in=pks)) if pks else 0


def approvals_void_for_tools(*, tool_pks: Iterable[int]) -> int:
    """Expire the pending and approved requests for these tools that their requesters may no longer use (the tools
    were held, or came to require an entitlement), each audited as the sweep does, at once (redteam55, Z6): as
    ``approvals_void_for_people``. Returns how many."""
    pks = list(tool_pks)
    return _expire_lost_access(_open_requests().filter(tool_id__in=pks)) if pks else 0


def _open_requests() -> QuerySet[ApprovalRequest]:
    return ApprovalRequest.objects.filter(status__in=[ApprovalStatus.PENDING, ApprovalStatus.APPROVED])


def _expire_lost_access(open_requests: QuerySet[ApprovalRequest]) -> int:
    """Expire those of ``open_requests`` whose requester may no longer execute the tool, but those of a server only
    not serving for now (``SERVER_STATUSES_THAT_PASS``: judged again once it is back). Returns how many."""
    # A page at a time, each judged in a fixed number of queries (``approval_requests_usable``, uncached: this
    # decides) and expired in one update: one ORM query per request took minutes for a large backlog.
    rows = open_requests.select_related("requester").only("token", "tool", "requester").order_by("pk")
    expired, after = 0, 0
    while page := list(rows.filter(pk__gt=after)[:EXPIRE_PAGE]):
        usable = approval_requests_usable(requests=page)
        lost = [request.pk for request in page if request.pk not in usable]
        lost_for_good = open_requests.filter(pk__in=lost).exclude(tool__server__status__in=SERVER_STATUSES_THAT_PASS)
        expired += approvals_expire(lost_for_good, reason="requester_lost_access") if lost else 0
        after = page[-1].pk
    return expired


def _denial_error(request: ApprovalRequest, *, viewer: AbstractBaseUser) -> ApprovalError:
    """A denial as the requester is told it: who (as ``viewer`` may see them), when, and the approver's reason."""
    shown = with_approval_people_shown(ApprovalRequest.objects.filter(pk=request.pk), viewer=viewer)
    denied_by = shown.values_list("decided_by_shown", flat=True).first() or "an approver"
    denied_at = (request.decided_at or timezone.now()).astimezone(UTC).replace(microsecond=0)
    reason = " ".join(request.decision_reason.split())[:MAX_DENIAL_REASON_CHARS]
    return ApprovalError(
        "denied",
        f"This call was denied by {denied_by} at {denied_at:%Y-%m-%d %H:%M} UTC (approval_id {request.approval_id}). "
        f"Their reason: {reason}",
        details={
            "approval_id": request.approval_id,
            "denied_by": denied_by,
            "denied_at": denied_at.isoformat(),
            "denial_reason": reason,
        },
    )


def _rejection(request: ApprovalRequest, *, principal: Principal, tool: Tool, digest: str) -> ApprovalError:
    """Why a use was refused, read after the conditional update failed."""
    request.refresh_from_db()
    now = timezone.now()
    current_hash = Tool.objects.filter(pk=tool.pk).values_list("definition_hash", flat=True).first()
    if request.status == ApprovalStatus.CONSUMED:
        return ApprovalError("used", "This approval was already used")
    if request.status == ApprovalStatus.DENIED:
        return _denial_error(request, viewer=principal.user)
    if request.status == ApprovalStatus.EXPIRED or request.expires_at <= now:
        _expire(request, reason="timed_out")
        return ApprovalError("expired", "This approval has expired")
    if request.status == ApprovalStatus.PENDING:
        return ApprovalError("not_approved", "This request is still waiting for an approver", request=request)
    if current_hash != request.tool_definition_hash:
        return ApprovalError("definition_changed", "The tool changed since the approval; ask again")
    if request.policy_version_id != policy_version_current().pk:
        return ApprovalError("policy_changed", "The policy changed since the approval; ask again")
    return ApprovalError("unknown", "Unknown approval id")


def _retry_if_sqlite_locked(func):
    """SQLite can report a concurrent writer as "locked" instead of waiting (shared-cache and lock-upgrade
    cases). Outside a transaction, run the whole operation again: the retry sees the other writer's result.
    Any other error, any other database, or a call inside a transaction propagates unchanged."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        for attempt in range(SQLITE_LOCK_RETRIES + 1):
            try:
                return func(*args, **kwargs)
            except OperationalError as exc:
                retryable = connection.vendor == "sqlite" and "locked" in str(exc) and not connection.in_atomic_block
                if not retryable or attempt == SQLITE_LOCK_RETRIES:
                    raise
                time.sleep(0.01 * (attempt + 1))
        raise AssertionError("unreachable")

    return wrapper


@_retry_if_sqlite_locked
def approval_consume(*, approval_id: object, principal: Principal, tool: Tool, arguments: Any) -> ApprovalRequest:
    """Use an approval for this exact call, once. Atomic: of two concurrent uses exactly one succeeds.

    The approval must belong to this principal (same user, token and agent; anything else looks like an
    unknown id, T12), name this tool, match the digest of ``arguments`` (checked next, whatever the request's
    state), be approved and unexpired, and the tool's definition hash and the policy version must not have
    changed. On refusal an
    ``approval.rejected`` audit event (``approval.polled`` for a request still pending) is written in the caller's
    transaction and ApprovalError is raised.
    Raises ArgumentsNotCanonical, ApprovalError."""
    digest = arguments_digest(arguments)
    try:
        request = approval_get(approval_id=approval_id)
    except ApprovalError as error:  # a forged or unknown id is refused on the record too (never echoing it)
        _audit_rejection(principal=principal, tool=tool, request=None, error=error)
        raise
    if (
        request.requester_id != principal.user.pk
        or request.token_id != principal.token_id
        or request.agent != principal.agent
        or request.tool_id != tool.pk
    ):
        error = ApprovalError("unknown", "Unknown approval id")
        _audit_rejection(principal=principal, tool=tool, request=None, error=error)
        raise error
    if request.arguments_digest != digest:
        # Before the request's state: an approval, pending or decided, is for the arguments it was asked for
        # only. Told "still waiting", a caller that changed them would wait for an approval it can never use.
        error = ApprovalError("arguments_mismatch", "The arguments differ from the ones this approval was asked for")
        _audit_rejection(principal=principal, tool=tool, request=request, error=error)
        raise error
    now = timezone.now()
    current_hash = Tool.objects.filter(pk=tool.pk).values_list("definition_hash", flat=True).first()
    if (
        request.status == ApprovalStatus.APPROVED  # others are refused below as used, denied, expired, pending
        and current_hash == request.tool_definition_hash  # a changed tool is refused below as "definition_changed"
        and not tool_executable_by(principal=principal, tool_pk=tool.pk)
    ):
        # The requester lost access after asking (a revoked grant by any path, a hold): the approval is void,
        # whoever approved it (Z6).
        _expire(request, reason="requester_lost_access")
        error = ApprovalError("requester_lost_access", "You may no longer call this tool; the approval is void")
        _audit_rejection(principal=principal, tool=tool, request=request, error=error)
        raise error
    version = policy_version_current()
    with transaction.atomic():
        # One UPDATE on this table's own columns, first in its transaction: the database re-checks the WHERE
        # clause on the row it locks (Postgres) or serializes writers (SQLite), so a second concurrent use
        # changes nothing.
        used = ApprovalRequest.objects.filter(
            pk=request.pk,
            status=ApprovalStatus.APPROVED,
            expires_at__gt=now,
            arguments_digest=digest,
            tool_definition_hash=current_hash,
            policy_version=version,
        ).update(status=ApprovalStatus.CONSUMED, consumed_at=now)
        if used:
            request.refresh_from_db()
            audit_record(
                event_type=AuditEventType.APPROVAL_CONSUMED,
                principal=principal,
                tool=tool,
                approval=request,
                outcome=AuditOutcome.SUCCESS,
                payload={"arguments_digest": digest},
            )
            return request
    error = _rejection(request, principal=principal, tool=tool, digest=digest)
    _audit_rejection(principal=principal, tool=tool, request=request, error=error)
    raise error


def approval_give_back(*, request: ApprovalRequest, principal: Principal) -> bool:
    """An approval used by ``principal``'s call that was then never sent (the database failed in the check just
    before sending, the upstream's side refused it): approved again, for the same call to use before its expiry, as
    if it had not been used. Only the use it was consumed by is undone (its ``consumed_at``). Unless the requester
    lost access meanwhile (redteam50, Z6): a revocation voids open approvals, not one in use, so it is voided now, as
    the revocation would have (``approval.expired``, ``requester_lost_access``); given back, it was usable again once
    access came back. Returns whether it was given back."""
    given = ApprovalRequest.objects.filter(
        pk=request.pk, status=ApprovalStatus.CONSUMED, consumed_at=request.consumed_at
    ).update(status=ApprovalStatus.APPROVED, consumed_at=None)
    if given and not tool_executable_by(principal=principal, tool_pk=request.tool_id):
        _expire(request, reason="requester_lost_access")
        return False
    return bool(given)


def _audit_rejection(
    *,
    principal: Principal,
    tool: Tool,
    request: ApprovalRequest | None,
    error: ApprovalError,
    asked_again: bool = False,
    mark: dict[str, str] | None = None,
) -> None:
    """``asked_again``: a new request for a call denied recently, refused before it was opened (not a use).
    A use of a request still waiting for an approver is an agent polling it, as it is told to (``_audit_asked_about``).
    ``mark``: added to the payload (the asking call's id, ``approval_request_create``).
    """
    if error.code == "not_approved" and request is not None:
        _audit_asked_about(principal=principal, tool=tool, request=request, mark=mark)
        return
    audit_record(
        event_type=AuditEventType.APPROVAL_REJECTED,
        principal=principal,
        tool=tool,
        approval=request,
        outcome=AuditOutcome.DENIED,
        payload={"code": error.code, **({"asked_again": True} if asked_again else {}), **(mark or {})},
    )


def _audit_asked_about(
    *, principal: Principal, tool: Tool, request: ApprovalRequest, mark: dict[str, str] | None = None
) -> None:
    """A call that asked about its request before using it: polled with the approval_id while pending, or sent
    again without it while pending or approved. On the record as that (``approval.polled``, outcome pending, the
    request's status), never as a refusal or a new request an approver or the trail's filters would count."""
    audit_record(
        event_type=AuditEventType.APPROVAL_POLLED,
        principal=principal,
        tool=tool,
        approval=request,
        outcome=AuditOutcome.PENDING,
        payload={"status": request.status, **(mark or {})},
    )
