"""Tell approvers a request is waiting: e-mail to everyone who may approve the tool, and an optional signed
webhook: the request's tenant's own (``Tenant.approval_webhook_url_env``), else the install-wide one
(``SCOUT_APPROVAL_WEBHOOK_URL``). Runs in a Celery task after the request's transaction commits, never inside the
agent's call.

Every attempt is recorded (NotificationAttempt, in the admin under Servers & sync → Notifications sent).
Errors: webhook failures raise WebhookError (the task retries); mail failures, and a tenant webhook whose
environment variables are not set, are recorded and logged. None ever names argument values (approvers read
those in the admin) or a webhook's URL or secret."""

import hashlib
import hmac
import ipaddress
import json
import logging
import os
import time
from collections import defaultdict
from dataclasses import dataclass
from urllib.parse import urlsplit

import anyio
import httpx
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.mail import send_mail
from django.urls import reverse

from catalog.constants import make_tool_id
from catalog.upstream import run_async
from governance.choices import NotificationChannel, NotificationOutcome
from governance.constants import OTHER_TENANT_AGENT, OTHER_TENANT_PERSON
from governance.models import (
    ApiToken,
    ApprovalRequest,
    NotificationAttempt,
    ServerGroupObjectPermission,
    ServerTenant,
    ServerUserObjectPermission,
    Tenant,
    ToolGroupObjectPermission,
    ToolUserObjectPermission,
)
from governance.selectors import tools_approvable_by, users_visible_to_operator

logger = logging.getLogger(__name__)
WEBHOOK_TIMEOUT_SECONDS = 10
SIGNATURE_HEADER = "X-Scout-Signature"


class WebhookError(Exception):
    """The approval webhook did not answer with a 2xx status."""


@dataclass(frozen=True)
class ApprovalWebhook:
    """Where a request is announced: the URL, the secret signing the body (empty: unsigned), and the environment
    variables a tenant names for them that are not set (``missing``: nothing can be sent)."""

    url: str
    secret: str
    missing: tuple[str, ...] = ()


def tenant_webhook_env_missing(*, tenant: Tenant) -> list[str]:
    """The environment variables ``tenant`` names for its approval webhook that are not set (or empty) in this
    process. Names only: the values are never read out."""
    names = (tenant.approval_webhook_url_env, tenant.approval_webhook_secret_env)
    return [name for name in names if name and not os.environ.get(name)]


def approval_webhook_for(*, request: ApprovalRequest) -> ApprovalWebhook | None:
    """The webhook announcing ``request``: its tenant's own when the tenant names one (and never the install-wide
    one then: that tenant's approvers get their requests on their own channel), else the install-wide webhook
    (shared requests, tenants without their own). None when there is no webhook to call."""
    tenant = request.tenant
    if tenant is not None and tenant.approval_webhook_url_env:
        missing = tenant_webhook_env_missing(tenant=tenant)
        if missing:
            return ApprovalWebhook(url="", secret="", missing=tuple(missing))
        secret_env = tenant.approval_webhook_secret_env
        return ApprovalWebhook(url=os.environ[tenant.approval_webhook_url_env], secret=os.environ.get(secret_env, ""))
    if settings.SCOUT_APPROVAL_WEBHOOK_URL:
        return ApprovalWebhook(url=settings.SCOUT_APPROVAL_WEBHOOK_URL, secret=settings.SCOUT_APPROVAL_WEBHOOK_SECRET)
    return None


def webhook_url_refused(url: str) -> str:
    """Why Scout will not post to ``url`` ("" when it will): only https, or http to a loopback address (a receiver on
    the same machine), unless SCOUT_APPROVAL_WEBHOOK_ALLOW_HTTP. Over plain http anyone on the way reads who asks
    for which tool and could answer 2xx for a receiver that never got the call."""
    parts = urlsplit(url)
    if parts.scheme == "https" and parts.hostname:
        return ""
    if parts.scheme != "http" or not parts.hostname:
        return "the approval webhook URL must be an https:// URL"
    try:
        loopback = ipaddress.ip_address(parts.hostname).is_loopback
    except ValueError:
        loopback = parts.hostname == "localhost"
    if loopback or settings.SCOUT_APPROVAL_WEBHOOK_ALLOW_HTTP:
        return ""
    return "the approval webhook URL is http:// to another host: use https (or set SCOUT_APPROVAL_WEBHOOK_ALLOW_HTTP)"


def _holders(model: type, object_ids: set[int], codename: str, holder: str) -> dict[int, set[int]]:
    """The ids of those holding ``codename`` on each of ``object_ids`` in a direct grant table, by object id."""
    rows = model.objects.filter(content_object_id__in=object_ids, permission__codename=codename)
    found: dict[int, set[int]] = defaultdict(set)
    for object_id, holder_id in rows.values_list("content_object_id", holder):
        found[object_id].add(holder_id)
    return found


def _approver_candidates(requests: list[ApprovalRequest]) -> dict[int, list]:
    """Of each request, by pk: active users but the requester holding ``approve`` on its tool or its server
    (directly or through a group), members of its tenant and its server's, if any: ``approvers_for`` before the
    own-grant rule. Nine queries for any number of requests: a page of 100 waiting on 100 tools read one query a
    tool (4 s at a year's volume on Postgres). Whoever issued the requester's token for them is left out too: the
    call may be theirs (``approval_decide`` refuses them)."""
    tool_ids = {request.tool_id for request in requests}
    server_ids = {request.tool.server_id for request in requests}
    tool_people = _holders(ToolUserObjectPermission, tool_ids, "approve_tool", "user_id")
    server_people = _holders(ServerUserObjectPermission, server_ids, "approve_server", "user_id")
    tool_groups = _holders(ToolGroupObjectPermission, tool_ids, "approve_tool", "group_id")
    server_groups = _holders(ServerGroupObjectPermission, server_ids, "approve_server", "group_id")
    members: dict[int, set[int]] = defaultdict(set)
    group_ids = set().union(*tool_groups.values(), *server_groups.values())
    for group_id, user_id in (
        get_user_model().groups.through.objects.filter(group_id__in=group_ids).values_list("group_id", "user_id")
    ):
        members[group_id].add(user_id)
    server_tenant = dict(ServerTenant.objects.filter(server_id__in=server_ids).values_list("server_id", "tenant_id"))
    tenant_ids = {request.tenant_id for request in requests} | set(server_tenant.values())
    tenant_people: dict[int, set[int]] = defaultdict(set)
    for tenant_id, user_id in Tenant.members.through.objects.filter(tenant_id__in=tenant_ids).values_list(
        "tenant_id", "user_id"
    ):
        tenant_people[tenant_id].add(user_id)
    token_ids = {request.token_id for request in requests} - {None}
    issuers = dict(ApiToken.objects.filter(pk__in=token_ids).values_list("pk", "created_by_id")) if token_ids else {}
    holders = {}
    for request in requests:
        tool_id, server_id = request.tool_id, request.tool.server_id
        groups = tool_groups[tool_id] | server_groups[server_id]
        ids = tool_people[tool_id] | server_people[server_id] | set().union(*(members[g] for g in groups))
        ids -= {request.requester_id, issuers.get(request.token_id)}
        # Z12: only people acting in the request's tenant and its server's (as the inbox shows it to them).
        for tenant_id in {request.tenant_id, server_tenant.get(server_id)} - {None}:
            ids &= tenant_people[tenant_id]
        holders[request.pk] = ids
    active = get_user_model().objects.filter(pk__in=set().union(*holders.values()), is_active=True).order_by("pk")
    users = {user.pk: user for user in active}
    return {pk: [users[i] for i in sorted(ids) if i in users] for pk, ids in holders.items()}


def approvers_for(*, request: ApprovalRequest) -> list:
    """Active users holding ``approve`` on the request's tool or its server, directly or through a group,
    except the requester (who may not decide their own request) and anyone whose only approve grant is one they
    made themselves, and only those who would see the request in their inbox: members of its tenant and of its
    server's tenant, if any."""
    return approvers_for_many(requests=[request])[request.pk]


def approvers_for_many(*, requests: list[ApprovalRequest]) -> dict[int, list]:
    """``approvers_for`` of each request, by pk: whether a person may decide is read once for all the requests'
    tools, not once per request."""
    candidates = _approver_candidates(requests)
    tool_ids = {request.tool_id for request in requests}
    approvable: dict[int, set[int]] = {}
    for user in {user.pk: user for users in candidates.values() for user in users}.values():
        # Only those who may decide: an approve grant never counts for the person who made it.
        approvable[user.pk] = set(tools_approvable_by(user=user).filter(pk__in=tool_ids).values_list("pk", flat=True))
    return {
        request.pk: [user for user in candidates[request.pk] if request.tool_id in approvable[user.pk]]
        for request in requests
    }


def _decide_url(request: ApprovalRequest) -> str:
    return settings.SCOUT_PUBLIC_URL + reverse("admin:governance_approvalrequest_decide", args=[request.pk])


def approval_payload(*, request: ApprovalRequest) -> dict:
    """What a notification says: who asked, for which tool, at what risk, and where to decide.

    The webhook sends one body for everyone the request reaches: a tenant's request reaches that tenant's
    approvers only (its requester is a member; its tenant's own webhook, or the install-wide one), a shared one
    every tenant's (the install-wide webhook). So the requester and their agent are named only when every such
    approver may see them (a tenant's request, or a shared request of a person in no tenant); a shared request of
    tenant B's person says someone in another tenant via an agent in another tenant (Z12). The e-mail names them
    per recipient (``_notify_by_mail``)."""
    if request.tenant_id is None and request.requester.tenants.exists():
        requester, agent = OTHER_TENANT_PERSON, OTHER_TENANT_AGENT if request.agent else ""
    else:
        requester, agent = request.requester.get_username(), request.agent
    # The tool's name is its upstream's choice, and receivers post it to a chat: named as the mail names it, so no
    # markup, link or line break in it reaches a channel (redteam37). The exact id: GET /api/v1/approvals/<id>/.
    tool_id, escaped = _tool_as_mailed(request)
    return {
        "event": "approval.requested",
        "approval_id": request.approval_id,
        "tool_id": tool_id,
        "tool_name_escaped": escaped,
        "server": request.tool.server.slug,
        "risk_class": request.risk_class,
        "operation_class": request.operation_class,
        "requester": requester,
        "agent": agent,
        "tenant": request.tenant.slug if request.tenant_id is not None else "",
        "created_at": request.created_at.isoformat(),
        "expires_at": request.expires_at.isoformat(),
        "decide_url": _decide_url(request),
    }


def webhook_signature(*, body: bytes, secret: str, timestamp: int) -> str:
    """``t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">``, as the receiver recomputes it. The timestamp
    is signed with the body, so a captured call verifies only within the receiver's tolerance (README: 5 minutes)
    and cannot be replayed later; each attempt, retries too, is signed when it is sent."""
    signed = f"{timestamp}.".encode() + body
    return f"t={timestamp},v1=" + hmac.new(secret.encode(), signed, hashlib.sha256).hexdigest()


def approval_notify(*, request_pk: int, attempt: int = 1) -> dict:
    """Send the e-mails and the webhook for one new request, each recorded as a NotificationAttempt (sent or
    failed) that operators read in the admin. A retry sends again only what has not been sent yet. Returns
    what was sent (for the task's result). Raises WebhookError when the webhook answers with an error status
    or cannot be reached (the task retries); a mail failure is recorded and logged, not retried (approvers
    who got it would get it twice), and so is a tenant webhook whose variables are not set."""
    request = ApprovalRequest.objects.select_related("tool", "tool__server", "requester", "tenant").get(pk=request_pk)
    payload = approval_payload(request=request)
    emails = _notify_by_mail(request, payload, attempt)
    webhook = approval_webhook_for(request=request)
    if webhook is not None and not _already_sent(request, NotificationChannel.WEBHOOK):
        _notify_by_webhook(request, payload, webhook, attempt)
    return {"emails": emails, "webhook": webhook is not None}


def _already_sent(request: ApprovalRequest, channel: str) -> bool:
    return NotificationAttempt.objects.filter(
        approval=request, channel=channel, outcome=NotificationOutcome.SENT
    ).exists()


def _record(request: ApprovalRequest, channel: str, attempt: int, target: str, *, error: str = "", status=None):
    NotificationAttempt.objects.create(
        approval=request,
        channel=channel,
        outcome=NotificationOutcome.FAILED if error else NotificationOutcome.SENT,
        attempt=attempt,
        target=target[:300],
        status_code=status,
        detail=error[:300],
    )


def _notify_by_mail(request: ApprovalRequest, payload: dict, attempt: int) -> int:
    approvers = [user for user in approvers_for(request=request) if user.email]
    if not approvers or _already_sent(request, NotificationChannel.EMAIL):
        return 0
    # A tenant-less request of tenant B's person reaches tenant A's approvers too: they read "someone in another
    # tenant", never the name (Z12). One mail (and one logged attempt) per tenant set of approvers, so the
    # notification log can leave out the attempts to people its reader may not see.
    groups: dict[tuple[tuple[str, str], frozenset[int]], list[str]] = {}
    for approver in approvers:
        tenants = frozenset(approver.tenants.values_list("pk", flat=True))
        groups.setdefault((_requester_as_seen_by(request, approver), tenants), []).append(approver.email)
    return sum(_send_mail(request, payload, asker, emails, attempt) for (asker, _), emails in groups.items())


def _requester_as_seen_by(request: ApprovalRequest, approver) -> tuple[str, str]:
    """Who asked and through which agent, as ``approver`` may read them (the agent is the requester's)."""
    people = get_user_model().objects.filter(users_visible_to_operator(user=approver))
    if people.filter(pk=request.requester_id).exists():
        return request.requester.get_username(), request.agent
    return OTHER_TENANT_PERSON, OTHER_TENANT_AGENT if request.agent else ""


# A tool's name as a mail shows it: its upstream chose it, and a mail program makes a link of a URL or a domain in it
# ("refund: approve at https://scout-approvals.example/...", "backup.zip"), in a mail from Scout to its approvers.
# Letters, digits, "_" and "-" are shown as they are; any other character is escaped.
_MAILED_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-")
ESCAPED_NAME_NOTE = "(The tool's name holds other characters than letters, digits, _ and -: escaped here.)\n"


def _tool_as_mailed(request: ApprovalRequest) -> tuple[str, bool]:
    """The request's tool id as a mail names it (``_MAILED_NAME_CHARS``), and whether its name was escaped."""
    name = request.tool.name
    shown = "".join(ch if ch in _MAILED_NAME_CHARS else f"\\u{ord(ch):04x}" for ch in name)
    return make_tool_id(request.tool.server.slug, shown), shown != name


def _send_mail(
    request: ApprovalRequest, payload: dict, asker: tuple[str, str], recipients: list[str], attempt: int
) -> int:
    requester, agent = asker
    tool, escaped = _tool_as_mailed(request)
    try:
        send_mail(
            subject=f"[Scout] Approval needed: {tool} ({request.get_risk_class_display()} risk)",
            message=(
                f"{requester}{' via ' + agent if agent else ''} asks to call "
                f"{tool} ({request.get_risk_class_display()} risk, "
                f"{request.get_operation_class_display()}).\n"
                f"{ESCAPED_NAME_NOTE if escaped else ''}\n"
                f"Read the exact arguments and approve or deny it before {payload['expires_at']}:\n"
                f"{payload['decide_url']}\n"
            ),
            from_email=None,
            recipient_list=recipients,
        )
    except Exception as exc:  # noqa: BLE001 - any mail backend error is recorded for operators
        error = f"{type(exc).__name__}: {exc}"
        logger.warning("approval e-mail for %s failed: %s", request.approval_id, error)
        _record(request, NotificationChannel.EMAIL, attempt, ", ".join(recipients), error=error)
        return 0
    _record(request, NotificationChannel.EMAIL, attempt, ", ".join(recipients))
    return len(recipients)


def _notify_by_webhook(request: ApprovalRequest, payload: dict, webhook: ApprovalWebhook, attempt: int) -> None:
    if webhook.missing:
        # Not retried: a worker's environment does not change while it runs. Names only, never a value.
        error = (
            f"tenant {request.tenant}'s approval webhook: environment variable(s) not set: {', '.join(webhook.missing)}"
        )
        logger.warning("approval webhook for %s not sent: %s", request.approval_id, error)
        _record(request, NotificationChannel.WEBHOOK, attempt, "(not configured)", error=error)
        return
    parts = urlsplit(webhook.url)
    target = parts.hostname + (f":{parts.port}" if parts.port else "") if parts.hostname else "(no host)"
    refused = webhook_url_refused(webhook.url)
    if refused:
        # Not retried, like a missing variable: the URL does not change while the worker runs. Nothing was sent.
        logger.warning("approval webhook for %s not sent: %s", request.approval_id, refused)
        _record(request, NotificationChannel.WEBHOOK, attempt, target, error=refused)
        return
    body = json.dumps(payload, sort_keys=True).encode()
    headers = {"Content-Type": "application/json"}
    if webhook.secret:
        headers[SIGNATURE_HEADER] = webhook_signature(body=body, secret=webhook.secret, timestamp=int(time.time()))
    try:
        status = _webhook_post(webhook.url, body, headers)
    except TimeoutError:
        error = f"approval webhook did not answer within {WEBHOOK_TIMEOUT_SECONDS:g} s"
        _record(request, NotificationChannel.WEBHOOK, attempt, target, error=error)
        raise WebhookError(error) from None
    except httpx.HTTPError as exc:
        error = f"approval webhook unreachable: {type(exc).__name__}"
        _record(request, NotificationChannel.WEBHOOK, attempt, target, error=error)
        raise WebhookError(error) from None
    if not 200 <= status < 300:
        error = f"approval webhook answered {status}"
        _record(request, NotificationChannel.WEBHOOK, attempt, target, error=error, status=status)
        raise WebhookError(error)
    _record(request, NotificationChannel.WEBHOOK, attempt, target, status=status)


def _webhook_post(url: str, body: bytes, headers: dict[str, str]) -> int:
    """POST ``body`` to the receiver and return its status code; its body is never read. Raises TimeoutError after
    WEBHOOK_TIMEOUT_SECONDS for the whole call (httpx's timeout bounds each read: a receiver sending a byte of its
    headers or body before each one ran out held the worker as long as it liked), httpx.HTTPError otherwise."""

    async def post() -> int:
        with anyio.fail_after(WEBHOOK_TIMEOUT_SECONDS):
            # trust_env=False: straight to the receiver, never through an HTTP(S)_PROXY from the worker's environment
            # (a proxy would read every request and could answer for the receiver).
            async with httpx.AsyncClient(timeout=WEBHOOK_TIMEOUT_SECONDS, trust_env=False) as client:
                async with client.stream("POST", url, content=body, headers=headers) as response:
                    return response.status_code

    return run_async(post)
