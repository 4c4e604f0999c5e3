"""execute_tool for one verified principal: authorize, validate, apply the approval policy, claim the
idempotency key, call the upstream server through the pool, record the outcome.

Sync functions here touch the ORM; ``gateway_execute`` is async and runs them through ``run_orm``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from itertools import islice
from typing import Any

import anyio
import jsonschema
import mcp_types as types
from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import DatabaseError, IntegrityError, transaction
from django.urls import NoReverseMatch, reverse
from django.utils import timezone
from opentelemetry import trace

from catalog.choices import Transport
from catalog.models import Tool
from catalog.schemas import (
    SchemaCheckTooLong,
    UnsafeSchema,
    arguments_validator,
    schema_check_deadline,
    schema_evaluation_problem,
)
from catalog.secrets import json_secrets_removed, server_secrets
from governance.choices import AuditEventType, AuditOutcome, OperationClass
from governance.constants import SCOPE_EXECUTE
from governance.models import AuditEvent
from governance.principals import Principal
from governance.selectors import ToolNotFound, tool_get_for_principal, tool_still_executable_by
from governance.services.audit import audit_record
from search.choices import SearchOutcomeKind
from search.usage import search_outcome_record

from ..choices import IdempotencyStatus
from ..constants import (
    MAX_APPROVAL_ID_CHARS,
    MAX_IDEMPOTENCY_KEY_CHARS,
)
from ..db import BUSY_TEXT, DatabaseBusy, database_busy, repeatable, run_orm, run_orm_or_busy, running_again
from ..metrics import EXECUTE_SECONDS, EXECUTIONS, UPSTREAM_CALL_FAILURES, UPSTREAM_SECONDS
from ..models import IdempotencyRecord
from ..upstreams import CallProgress, OutputTooLarge, UpstreamCallError, UpstreamPool, call_timeout
from .discovery import (
    UnknownTool,
    _audit_unknown,
    _policy_fields,
    compact_json,
    schema_for_model,
    server_note,
    tool_ids_close_to,
    tool_not_serving,
)
from .output import result_shown

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)  # a no-op until scoutsite.tracing configures OpenTelemetry

# --- execute_tool -------------------------------------------------------------------------------


class GatewayResult(types.CallToolResult):
    """A result the gateway wrote itself (a refusal, a failure it saw): ``refusal_kind`` and the metrics read its
    structured keys. Told apart by this class, never by a key: an upstream's own result carries any keys it likes
    (``{"approval_required": true, "approval_id": ...}`` made a tool's error a pending approval, redteam43)."""


class StoredResult(types.CallToolResult):
    """The stored result of an idempotency key's earlier call, answered to a repeat of it: no new outcome. It may be
    an upstream's, so its keys are never read as the gateway's."""


def error_result(text: str, **structured: Any) -> GatewayResult:
    """An isError tool result the model can act on."""
    return GatewayResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured or None,
        is_error=True,
    )


def canonical_arguments(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _where(path: Iterable[str | int]) -> str:
    where = "arguments"
    for part in path:
        where += f"[{part}]" if isinstance(part, int) else f".{part}"
    return where


def _schema_error_text(error: jsonschema.ValidationError, schema: dict[str, Any]) -> str:
    """Names the failing path and the rule, never the rejected value (it is the caller's data)."""
    where = _where(error.absolute_path)
    validator, expected = error.validator, error.validator_value
    if validator == "required":
        missing = [name for name in expected if isinstance(error.instance, dict) and name not in error.instance]
        text = f"{where}: missing required propert{'y' if len(missing) == 1 else 'ies'} {', '.join(missing)}"
        return text + _misnamed(error)
    if validator == "additionalProperties":
        allowed = sorted((error.schema.get("properties") or {}).keys())
        return f"{where}: has properties the schema does not allow (allowed: {', '.join(allowed) or 'none'})"
    if validator == "type":
        return f"{where}: must be of type {expected if isinstance(expected, str) else ' or '.join(expected)}"
    if validator == "enum":
        return f"{where}: must be one of {compact_json(expected)[:300]}"
    if validator in (
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "minLength",
        "maxLength",
        "minItems",
        "maxItems",
        "pattern",
        "format",
        "const",
        "multipleOf",
    ):
        return f"{where}: fails {validator} {compact_json(expected)[:200]}"
    return f"{where}: does not satisfy the schema's {validator!r} rule"


NAMES_SHOWN = 20


def _misnamed(error: jsonschema.ValidationError) -> str:
    """For a missing property: whether the object has properties its schema does not name (a misspelt or
    misremembered name, "tz" for "timezone"), with the names the schema gives. The sent names are not repeated
    (they are the caller's data); a schema that forbids other properties reports them as its own error, naming the
    allowed ones, so it gets no clause here: both said it ("... missing required property query, and has properties
    the schema does not name (its properties: query); arguments: has properties the schema does not allow (allowed:
    query)", server-memory's search_nodes called with "name", agentux17)."""
    properties = error.schema.get("properties")
    if not isinstance(properties, dict) or not properties or not isinstance(error.instance, dict):
        return ""
    if error.schema.get("additionalProperties") is False and "patternProperties" not in error.schema:
        return ""
    if all(key in properties for key in error.instance):
        return ""
    names = list(properties)
    shown = ", ".join(names[:NAMES_SHOWN]) + (", …" if len(names) > NAMES_SHOWN else "")
    return f", and has properties the schema does not name (its properties: {shown})"


# Problems named in one answer: each one left out costs the model another call to learn it.
ARGUMENT_PROBLEMS_SHOWN = 5
# Errors read before the answer is written: each holds its message (an enum's error quotes the whole enum), and a
# caller's 100,000 items failing a 400-name enum held 1.2 GB (redteam39). The first ones found are named.
ARGUMENT_ERRORS_READ = 100


@dataclass(frozen=True)
class ArgumentsProblem:
    """Why arguments fail their schema: ``text`` names each failing path; ``at`` holds the paths (under
    ``arguments``) whose schema an answer shows, or None when the fault is not one property's (a rule of the
    whole object, a schema Scout cannot use)."""

    text: str
    at: tuple[tuple[str | int, ...], ...] | None = None
    missing: bool = False  # a required property is left out: its value may be one only the server's note names


def arguments_problem(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """A message naming each failing path (the first ARGUMENT_PROBLEMS_SHOWN, shallowest first), or None when
    ``arguments`` satisfy ``schema``."""
    problem = arguments_check(schema, arguments)
    return problem.text if problem is not None else None


def arguments_check(schema: dict[str, Any], arguments: dict[str, Any]) -> ArgumentsProblem | None:
    """``arguments_problem`` with the paths at fault, or None when ``arguments`` satisfy ``schema``."""
    try:
        # Regular expressions run on RE2 (linear time): an upstream pattern cannot stall the gateway (ReDoS).
        validator = arguments_validator(schema)
        with schema_check_deadline(settings.SCOUT_MCP_SCHEMA_CHECK_SECONDS):
            errors = sorted(
                islice(validator.iter_errors(arguments), ARGUMENT_ERRORS_READ),
                key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path))),
            )
    except SchemaCheckTooLong:
        # A schema that costs exponential time (C1-19) held an ORM thread, and the CPU, for as long as it ran.
        return ArgumentsProblem(
            f"checking them against the tool's input schema took over {settings.SCOUT_MCP_SCHEMA_CHECK_SECONDS:g} s, "
            "so the call was not sent; ask an operator to review the tool's schema"
        )
    except UnsafeSchema:
        # Stored before sync refused such schemas: never fall back to Python's backtracking re.
        return ArgumentsProblem(
            "the tool's input schema uses a regular expression Scout cannot check safely; ask an operator to re-sync"
        )
    except (jsonschema.SchemaError, jsonschema.exceptions.UnknownType, RecursionError, TypeError, ValueError):
        return ArgumentsProblem(
            "the tool's input schema cannot be used to check arguments; ask an operator to re-sync the server"
        )
    if not errors:
        return None
    shown: dict[str, jsonschema.ValidationError] = {}
    for error in errors:
        shown.setdefault(_schema_error_text(error, schema), error)
    texts = list(shown)
    more = len(texts) - ARGUMENT_PROBLEMS_SHOWN
    text = "; ".join(texts[:ARGUMENT_PROBLEMS_SHOWN]) + (f"; and {more} more" if more > 0 else "")
    at_fault = list(shown.values())[:ARGUMENT_PROBLEMS_SHOWN]
    missing = any(error.validator == "required" for error in at_fault)
    return ArgumentsProblem(text, _paths_at_fault(at_fault), missing=missing)


def _paths_at_fault(errors: list[jsonschema.ValidationError]) -> tuple[tuple[str | int, ...], ...] | None:
    """The paths whose schema tells the model how to fix ``errors``: a failing value's own, a missing property's.
    None when one is a rule of the whole arguments object (anyOf, dependencies...): no one property is at fault.
    A property the schema does not allow adds none (the answer names the allowed ones)."""
    paths: list[tuple[str | int, ...]] = []
    for error in errors:
        path = tuple(error.absolute_path)
        if error.validator == "required" and isinstance(error.instance, dict):
            paths.extend((*path, name) for name in error.validator_value if name not in error.instance)
        elif error.validator == "additionalProperties":
            continue
        elif path:
            paths.append(path)
        else:
            return None
    return tuple(dict.fromkeys(paths))


# Per definition hash (a tool version): the estimate walks the whole schema, and a version's schema never changes.
_EVALUATION_PROBLEMS: dict[str, str | None] = {}
EVALUATION_PROBLEMS_CACHED = 4096
_UNCHECKED = object()


def stored_schema_problem(tool: Tool) -> str | None:
    """Why checking arguments against ``tool``'s stored inputSchema can take exponential time, in the words sync
    refuses such a schema with (``schema_evaluation_problem``), or None. A tool stored before sync refused them
    keeps its schema until its server syncs again: refused here, with the same reason, and not sent."""
    problem = _EVALUATION_PROBLEMS.get(tool.definition_hash, _UNCHECKED)
    if problem is _UNCHECKED:
        problem = schema_evaluation_problem(tool.input_schema or {})
        if len(_EVALUATION_PROBLEMS) >= EVALUATION_PROBLEMS_CACHED:
            _EVALUATION_PROBLEMS.clear()
        if tool.definition_hash:
            _EVALUATION_PROBLEMS[tool.definition_hash] = problem
    if problem is None:
        return None
    return f"the tool's input schema is refused ({problem}), so the call was not sent; ask an operator to review it"


@dataclass
class ExecutionPlan:
    """A call that passed every check and may now go to the upstream server."""

    principal: Principal
    tool: Tool
    arguments: dict[str, Any]
    arguments_digest: str
    approval: Any = None
    idempotency: IdempotencyRecord | None = None
    started: float = field(default_factory=time.monotonic)
    prepared_at: datetime = field(default_factory=timezone.now)
    call_id: str = field(default_factory=lambda: uuid.uuid4().hex)  # in its execution event: recorded once
    reads_only: bool = False  # Scout classifies the tool as a read: a call cut off mid-way changed nothing


def _principal_key(principal: Principal) -> str:
    """Whose idempotency keys: one token's (a session's: its person's). A key is answered before the approval gate,
    and an approval is the requesting token's: a key space shared by a person's tokens replayed a call one token
    ran with its approval to another token that had none (T5, T12)."""
    return f"u{principal.user.pk}|a:{principal.agent}|t:{principal.tenant}|k:{principal.token_ref}"


def _sentence(text: str) -> str:
    """``text`` ending as a sentence: an approver's reason usually brings its own full stop."""
    return text if text.endswith((".", "!", "?")) else f"{text}."


# How long a model waits before it checks a pending approval again, said in the answer's text and, in
# milliseconds, as its "pollInterval" (MCP's name for a task's suggested polling interval): a person decides,
# so a check every minute finds the decision soon enough without filling the audit log with polls.
APPROVAL_POLL_SECONDS = 60


def _approval_url(approval: Any) -> str:
    try:
        path = reverse("admin:governance_approvalrequest_decide", args=[approval.pk])
    except NoReverseMatch:
        path = "/admin/governance/approvalrequest/"
    return f"{settings.SCOUT_PUBLIC_URL}{path}"


def _approval_gate(
    *, principal: Principal, tool: Tool, arguments: dict[str, Any], approval_id: str | None, call_id: str = ""
) -> tuple[Any, types.CallToolResult | None]:
    """``(approval, None)`` when the call may run (approval None if none is needed), else ``(None, result)``.
    ``call_id``: the call's, in the payload of the approval events written (``approval_request_create``).

    ``tool`` was re-authorized for execution by ``execute_prepare`` in this piece of work; governance.call_decide
    applies the policy: it opens a pending request when an approval is needed, or consumes the given one
    atomically (once, for these exact arguments)."""
    from governance.services.approvals import ApprovalError, ArgumentsNotCanonical
    from governance.services.authorize import call_decide

    if approval_id is not None and (not isinstance(approval_id, str) or len(approval_id) > MAX_APPROVAL_ID_CHARS):
        return None, _denied(
            principal,
            tool,
            "invalid_approval_id",
            error_result("approval_id is not valid; call again without it to request a new approval"),
        )
    try:
        decision = call_decide(
            principal=principal, tool=tool, arguments=arguments, approval_id=approval_id, call_id=call_id
        )
    except ArgumentsNotCanonical as exc:
        return None, _denied(principal, tool, "invalid_arguments", error_result(f"Invalid arguments: {exc}"))
    except ApprovalError as exc:
        if exc.code == "denied":  # a person said no: the same call is refused with this denial for a while
            return None, error_result(
                f"{_sentence(str(exc))} Do not retry this call unchanged: tell the user it was denied and why, and "
                "ask the user before trying again; only a changed call that addresses the reason asks an approver "
                "anew.",
                approval_rejected=exc.code,
                **exc.details,
            )
        if exc.code == "not_approved":  # still pending: a new request would only wait in the same queue
            # Said as pending, not as a rejection: nobody refused anything, and the model should wait.
            # Where and until when an approver decides, as the first answer said: the model may have to tell the user.
            url, until = _approval_url(exc.request), exc.request.expires_at.astimezone(UTC)
            return None, error_result(
                f"{exc} at {url} (open until {until:%Y-%m-%d %H:%M} UTC). Until it is decided, "
                f"{_check_later(approval_id)}; meanwhile tell the user the call is waiting for approval. Do not call "
                "without approval_id.",
                approval_pending=True,
                approval_id=approval_id,
                approval_url=url,
                pollInterval=APPROVAL_POLL_SECONDS * 1000,
            )
        if exc.code == "already_approved":  # the model dropped the approval_id it was given: name it again
            approved_id = exc.details["approval_id"]
            return None, error_result(
                f"{exc}. Call execute_tool again with the same tool_id, the same arguments and approval_id "
                f'"{approved_id}" to run it.',
                approval_ready=True,
                approval_id=approved_id,
            )
        if exc.code == "too_many_pending":  # no request was opened: polling or retrying changes nothing until then
            return None, error_result(
                f"This call needs human approval, but no request was opened: {_sentence(str(exc))} Do not retry it "
                "now: tell the user which calls are waiting for approval, and call again once one is decided.",
                approval_rejected=exc.code,
            )
        if exc.code == "arguments_mismatch":
            return None, error_result(
                f"The approval cannot be used ({exc.code}): {exc}. Call again with exactly those arguments and "
                "this approval_id, or without approval_id to ask approval for these new arguments.",
                approval_rejected=exc.code,
            )
        return None, error_result(
            f"The approval cannot be used ({exc.code}): {exc}. Call again without approval_id to request a new one.",
            approval_rejected=exc.code,
        )
    if decision.allowed:
        return decision.approval, None
    request = decision.approval_request
    url = _approval_url(request)
    return None, error_result(
        f"This call needs human approval (approval_id {request.approval_id}, {decision.policy.risk_class} risk). "
        f"An approver decides at {url} . To run it once approved, {_check_later(request.approval_id)} (before, "
        "that call only answers that the request is still waiting). Meanwhile tell the user the call is waiting for "
        "approval.",
        approval_required=True,
        approval_id=request.approval_id,
        approval_url=url,
        pollInterval=APPROVAL_POLL_SECONDS * 1000,
    )


def _check_later(approval_id: str) -> str:
    """How and when a model checks a pending approval: the one way (execute_tool with its approval_id), not more
    often than ``APPROVAL_POLL_SECONDS`` (a person decides; a model told only "wait" polled again at once)."""
    return (
        f'call execute_tool again with the same tool_id, the same arguments and approval_id "{approval_id}", at most '
        f"once every {APPROVAL_POLL_SECONDS} seconds"
    )


def idempotency_records_purge(*, now: datetime | None = None) -> int:
    """Delete idempotency records past their expiry (SCOUT_MCP_IDEMPOTENCY_TTL); returns how many. Only a call that
    reused its key deleted its own before: each new key a caller sent stayed for ever, its result with it (up to
    SCOUT_MCP_MAX_OUTPUT_BYTES each). A running record is past its expiry long after any call could still run."""
    deleted, _ = IdempotencyRecord.objects.filter(expires_at__lte=now or timezone.now()).delete()
    return deleted


def _idempotency_keys_full(principal: Principal) -> bool:
    """Whether the caller's person already keeps ``SCOUT_MCP_MAX_IDEMPOTENCY_KEYS_PER_PERSON`` live keys (T13): each
    holds its call's whole result for the TTL, so a fresh key per call grew the table by the output cap per call at
    the person's /mcp rate until the purge. Run in the transaction that claims the key: the person's row is locked
    until it ends, so calls claiming new keys at the same instant count one after another (Postgres; as the
    approval and live-token caps do), never all the same kept keys."""
    limit = settings.SCOUT_MCP_MAX_IDEMPOTENCY_KEYS_PER_PERSON
    if limit <= 0:
        return False
    # NO KEY UPDATE: rows that merely point at the person (an audit event, this key's record) are still written.
    get_user_model().objects.select_for_update(no_key=True).filter(pk=principal.user.pk).exists()
    live = IdempotencyRecord.objects.filter(user=principal.user, expires_at__gt=timezone.now())
    return live[limit - 1 : limit].exists()  # counts no further than the limit


def _too_many_keys_result() -> types.CallToolResult:
    limit = settings.SCOUT_MCP_MAX_IDEMPOTENCY_KEYS_PER_PERSON
    hours = max(1, round(settings.SCOUT_MCP_IDEMPOTENCY_TTL / 3600))
    return error_result(
        f"Not run: this person already has {limit} idempotency keys kept (each is kept for {hours} h), the most "
        "allowed. Resend an earlier call with its own key, wait for keys to expire, or send this call without "
        "idempotency_key if running it twice would do no harm.",
        too_many_idempotency_keys=True,
    )


def _idempotency_claim(
    principal: Principal, key: str, tool: Tool, digest: str
) -> tuple[IdempotencyRecord | None, types.CallToolResult | None]:
    """Claim ``key`` for this call. Returns the new record, or a final result (stored, conflict, mismatch)."""
    now = timezone.now()
    principal_key = _principal_key(principal)
    IdempotencyRecord.objects.filter(principal_key=principal_key, key=key, expires_at__lte=now).delete()
    try:
        with transaction.atomic():
            record = IdempotencyRecord.objects.create(
                principal_key=principal_key,
                user=principal.user,
                key=key,
                tool_ref=tool.tool_id,
                arguments_digest=digest,
                created_at=now,
                expires_at=now + timedelta(seconds=settings.SCOUT_MCP_IDEMPOTENCY_TTL),
            )
        return record, None
    except IntegrityError:
        existing = IdempotencyRecord.objects.filter(principal_key=principal_key, key=key).first()
    if existing is None:  # expired and removed between the two statements
        return None, error_result("idempotency_key is busy; retry in a moment", idempotency_conflict=True)
    if existing.tool_ref != tool.tool_id or existing.arguments_digest != digest:
        # Another call, refused unsent: on the record as every refusal is (redteam56); a repeat of the same call is not
        # a new one and writes nothing.
        return None, _denied(
            principal,
            tool,
            "idempotency_mismatch",
            error_result(
                "idempotency_key was already used for a different call (other tool or arguments); use a new key",
                idempotency_mismatch=True,
            ),
        )
    if existing.status == IdempotencyStatus.RUNNING and existing.created_at < now - _longest_call():
        # No live process can still be running it (every call is bounded by the timeout cap): its process
        # died mid-call. It may have taken effect, so the retry learns that instead of "still running".
        return None, interrupted_result()
    if existing.status == IdempotencyStatus.RUNNING:
        return None, error_result(
            "A call with this idempotency_key is still running; wait for it instead of sending it again",
            idempotency_conflict=True,
        )
    return None, StoredResult.model_validate_json(existing.result)


NO_EXECUTE_SCOPE_TEXT = (
    "This token may search and inspect tools but not run them (it lacks the execute scope). Do not retry: tell the "
    "user that running a tool needs a token with the execute scope."
)


def execute_prepare(
    *,
    principal: Principal,
    tool_id: str,
    arguments: dict[str, Any],
    approval_id: str | None = None,
    idempotency_key: str | None = None,
) -> ExecutionPlan | types.CallToolResult:
    """Authorize, validate, apply the approval policy and claim the idempotency key.

    Returns a plan to run, or the final result (an error result, or the stored result of a repeated key).
    Raises UnknownTool for an unknown or hidden tool (or one the caller may not execute)."""
    if not principal.has_scope(SCOPE_EXECUTE):
        # Said before any tool is looked up: the answer is about the caller's own token, the same for every tool_id.
        audit_record(
            event_type=AuditEventType.EXECUTION,
            principal=principal,
            outcome=AuditOutcome.DENIED,
            payload={"meta_tool": "execute_tool", "reason": "no_execute_scope"},
        )
        return error_result(NO_EXECUTE_SCOPE_TEXT, execute_scope_missing=True)
    try:
        tool = tool_get_for_principal(principal=principal, tool_id=tool_id, permission="execute")
    except ToolNotFound:
        unavailable = tool_not_serving(principal=principal, tool_id=tool_id, permission="execute")
        if unavailable is not None:
            _audit_unknown(principal, "execute_tool", "server_not_serving")
            raise UnknownTool(not_serving=[unavailable]) from None
        _audit_unknown(principal, "execute_tool")
        closest = tool_ids_close_to(principal=principal, typed=[tool_id], permission="execute")
        raise UnknownTool(closest=closest) from None
    prepared = _prepare(
        principal=principal, tool=tool, arguments=arguments, approval_id=approval_id, idempotency_key=idempotency_key
    )
    if isinstance(prepared, types.CallToolResult):
        kind = refusal_kind(prepared)
        if kind is not None:
            pending = kind == SearchOutcomeKind.PENDING_APPROVAL
            approval_id = (prepared.structured_content or {}).get("approval_id", "") if pending else ""
            search_outcome_record(principal=principal, tool=tool, outcome=kind, approval_id=approval_id)
    return prepared


def refusal_kind(result: types.CallToolResult) -> str | None:
    """How a call that never reached the upstream ended, as the query log links it (None: a repeat of an
    earlier call's idempotency key, which is no new outcome, or a result the gateway did not write)."""
    if not isinstance(result, GatewayResult) or not result.is_error:
        return None
    structured = result.structured_content or {}
    if any(key.startswith("idempotency_") for key in structured):
        return None
    if structured.get("approval_pending") or structured.get("approval_ready"):
        return None  # a poll of a request already asked for: its first call was linked as pending
    if structured.get("approval_required"):
        return SearchOutcomeKind.PENDING_APPROVAL
    if structured.get("approval_rejected"):
        return SearchOutcomeKind.DENIED
    return SearchOutcomeKind.VALIDATION_ERROR  # arguments: not an object, not plain JSON, too large, invalid


def _prepare(
    *,
    principal: Principal,
    tool: Tool,
    arguments: dict[str, Any],
    approval_id: str | None,
    idempotency_key: str | None,
) -> ExecutionPlan | types.CallToolResult:
    # Every refusal from here on names a tool the caller may execute: each is written down (DENIED).
    if not isinstance(arguments, dict):
        return _denied(principal, tool, "invalid_arguments", error_result("arguments must be a JSON object"))
    try:
        canonical = canonical_arguments(arguments)
    except (ValueError, TypeError, RecursionError):
        return _denied(
            principal, tool, "invalid_arguments", error_result("arguments must be plain JSON (no NaN or Infinity)")
        )
    if len(canonical.encode()) > settings.SCOUT_MCP_MAX_ARGUMENT_BYTES:
        return _denied(
            principal,
            tool,
            "arguments_too_large",
            error_result(
                f"arguments are larger than {settings.SCOUT_MCP_MAX_ARGUMENT_BYTES} bytes; send less data per call"
            ),
        )
    # Checked before the approval gate: an approver is never asked for a call that cannot run, and the model
    # corrects its arguments now instead of after waiting for a decision (and asking again for the fixed call).
    stored = stored_schema_problem(tool)
    problem = ArgumentsProblem(stored) if stored else arguments_check(tool.input_schema or {}, arguments)
    if problem is not None:
        return _denied(
            principal, tool, "invalid_arguments", error_result(_invalid_text(problem, tool), invalid_arguments=True)
        )
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    # A NUL too: Postgres refuses one in text, and the key is stored (a bare "Error executing tool" and a traceback).
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str)
        or not idempotency_key
        or len(idempotency_key) > MAX_IDEMPOTENCY_KEY_CHARS
        or "\x00" in idempotency_key
    ):
        return _denied(
            principal,
            tool,
            "invalid_idempotency_key",
            error_result(
                f"idempotency_key must be a non-empty string of at most {MAX_IDEMPOTENCY_KEY_CHARS} chars, with no NUL"
            ),
        )
    record = None
    if idempotency_key is not None:
        existing = IdempotencyRecord.objects.filter(
            principal_key=_principal_key(principal), key=idempotency_key, expires_at__gt=timezone.now()
        ).first()
        if existing is not None:
            # A repeat (or a conflict) is answered before the approval gate: the first call already used it.
            _, final = _idempotency_claim(principal, idempotency_key, tool, digest)
            return final or error_result("idempotency_key is busy; retry in a moment", idempotency_conflict=True)
    with transaction.atomic():
        if idempotency_key is not None:
            if _idempotency_keys_full(principal):
                return _denied(principal, tool, "too_many_idempotency_keys", _too_many_keys_result())
            # Claimed before the approval is used: a repeat sent at once (a re-sent stream) waits here for this
            # call's transaction and is answered as a repeat of the key, never told its approval was used.
            record, final = _idempotency_claim(principal, idempotency_key, tool, digest)
            if final is not None:
                return final
        approval, final = _approval_gate(principal=principal, tool=tool, arguments=arguments, approval_id=approval_id)
        if final is not None:
            if record is not None:
                record.delete()  # this call does not run: its key stays free
            return final
    return ExecutionPlan(
        principal=principal,
        tool=tool,
        arguments=arguments,
        arguments_digest=digest,
        approval=approval,
        idempotency=record,
        reads_only=_policy_fields(tool)[1] == OperationClass.READ,
    )


# An invalid call's answer carries the schema of what is wrong (the failing or missing properties' own schemas), or
# the tool's whole inputSchema when no one property is at fault, up to this size: a model that called without
# searching (or forgot the schema) corrects its call at once instead of spending a tool_inspect turn on it, and is
# not sent the schema of every property it got right (git_log's answer to one mistyped max_count: 214 -> 30 tokens).
INVALID_SCHEMA_SHOWN_CHARS = 2000


def _invalid_text(problem: ArgumentsProblem, tool: Tool) -> str:
    schema = schema_for_model(tool.input_schema or {}, name=tool.name)
    parts = _schema_parts(schema, problem.at)
    note = _server_note_for(problem, tool)
    if parts is not None:
        shown = "; ".join(f"{_where(path)} {compact_json(part)}" for path, part in parts)
        if len(shown) <= INVALID_SCHEMA_SHOWN_CHARS:
            return (
                f"Invalid arguments: {problem.text}. Schema of {shown}.{note} Call again with that fixed "
                "(tool_inspect gives the whole inputSchema)."
            )
    whole = compact_json(schema)
    if len(whole) > INVALID_SCHEMA_SHOWN_CHARS:
        return (
            f"Invalid arguments: {problem.text}.{note} Call tool_inspect with this tool_id for its inputSchema, then "
            "call again."
        )
    return f"Invalid arguments: {problem.text}.{note} Call again with arguments that satisfy its inputSchema: {whole}"


def _server_note_for(problem: ArgumentsProblem, tool: Tool) -> str:
    """The operator's note on the tool's server (``server_note``), as " Server git: ...", when a required property is
    missing: what a property's value refers to is often only there (mcp-server-git's repo_path has no description;
    the demo's note names the repository), and a model that called without searching never read it. "" otherwise."""
    note = server_note(tool.server.description) if problem.missing else ""
    return f" Server {tool.server.slug}: {note}" if note else ""


def _schema_parts(schema: Any, paths: tuple[tuple[str | int, ...], ...] | None) -> list[tuple[Any, Any]] | None:
    """The schema of each path (a property's, an array's items'), or None when one cannot be read without the rest
    of the schema (none at fault, a "$ref", a combinator on the way): the whole schema is shown instead."""
    if not paths:
        return None
    parts = []
    for path in paths:
        node = schema
        for part in path:
            if not isinstance(node, dict):
                return None
            if isinstance(part, int):
                node = node.get("items")
            else:
                properties = node.get("properties")
                node = properties.get(part) if isinstance(properties, dict) else None
        if not isinstance(node, dict) or "$ref" in compact_json(node):
            return None
        parts.append((path, node))
    return parts


def _denied(principal: Principal, tool: Tool, reason: str, result: types.CallToolResult) -> types.CallToolResult:
    audit_record(
        event_type=AuditEventType.EXECUTION,
        principal=principal,
        tool=tool,
        outcome=AuditOutcome.DENIED,
        payload={"meta_tool": "execute_tool", "reason": reason},
    )
    return result


def _longest_call() -> timedelta:
    """Longer than any call can run in a live process: connect, the capped call, the finish step."""
    return timedelta(
        seconds=settings.SCOUT_UPSTREAM_CONNECT_TIMEOUT + settings.SCOUT_MCP_CALL_TIMEOUT_CAP + CALL_GRACE_SECONDS
    )


CALL_GRACE_SECONDS = 60
INTERRUPTED_TEXT = (
    "The call was interrupted before its result came back (the client disconnected or the gateway stopped). "
    "It was sent to the tool's server, so it may or may not have taken effect; check before trying again "
    "with a new idempotency_key."
)


def interrupted_result() -> types.CallToolResult:
    """The answer for a call whose outcome is unknown because it was interrupted mid-way."""
    return error_result(INTERRUPTED_TEXT, upstream_failure="interrupted", outcome_unknown=True)


# A call the tool's server may have received (the failure's outcome is "unknown"): each is followed by MAY_HAVE_RUN
# or READ_MAY_RUN_AGAIN.
UPSTREAM_FAILURE_TEXT = {
    "timeout": "The tool did not answer within {timeout:g} s and the call was cancelled.",
    "closed": "The tool's server stopped during the call; it is being restarted.",
    "protocol": "The tool's server answered the call with something that is not a valid MCP result.",
}
FAILED_DURING_THE_CALL = "The tool's server failed during the call."
# A call that was never sent (the outcome is "error"): nothing ran.
UPSTREAM_REFUSAL_TEXT = {
    "busy": "The tool's server has too many calls in flight; try again shortly.",
    "caller_busy": "The call was not sent: you already have {share} calls in flight to this tool's server, the most "
    "one person may have while others wait for it. Wait for one of them to end, then try again.",
    "backoff": "The tool's server failed recently and is restarting; try again in a few seconds.",
    # Nothing was sent: the breaker (catalog/breaker.py) keeps a failing server from being called at all.
    "circuit_open": "The tool's server is failing; Scout stopped calling it for {retry_in} s. The call was not sent. "
    "Try again after that, or use another tool.",
    # The server forgot the session twice running (a restart, and at once again): it took the call on neither.
    "session_gone": "The tool's server did not take the call (it keeps losing its sessions, as when it restarts): "
    "nothing ran. Try again shortly, or use another tool.",
}
NOT_SENT = "The tool's server could not be reached, so the call was not sent; try again later, or use another tool."
UPSTREAM_REFUSAL_TEXT["config"] = (
    "The call was not sent: no request the tool's server takes could be built from these arguments (a path argument "
    "may not be or hold '.' or '..'; a header or cookie argument holds printable ASCII only; the URL, query and path "
    "arguments included, stays under 64 kB), or the server is misconfigured. Check the arguments; if they are right, "
    "tell the user the tool cannot be called now."
)
# What to do after a call that reached the tool's server but did not come back (timeout, closed): a write may
# have taken effect; a tool Scout classifies as a read changed nothing, so "check first" would only stall a model.
MAY_HAVE_RUN = " The call may or may not have taken effect; check before trying again."
READ_MAY_RUN_AGAIN = (
    " This tool only reads (Scout's classification), so the call changed nothing: you may call it again (with a "
    "new idempotency_key if you sent one), asking for less if it can, or tell the user it did not answer."
)


# After an output too large to show: a read may simply be asked again for less; a write already took effect, so
# calling it again "to see the output" would do it twice.
ASK_FOR_LESS = " Call it again asking for less, for example with a filter, a smaller page or a narrower query."
OUTPUT_LOST_AFTER_A_WRITE = (
    " This tool changes things and the call reached it, so it has most likely taken effect: do not call it again to "
    "see its output (that would do it twice). Check its effect with a tool that reads, or tell the user."
)


ACCESS_CHANGED = "access_changed"
DATABASE_BUSY = "database_busy"
DATABASE_ERROR = "database_error"  # the check before sending failed otherwise (not busy): the call was not sent
UNSENT_FOR_THE_DATABASE = (DATABASE_BUSY, DATABASE_ERROR)
APPROVAL_NOW_REQUIRED = "approval_now_required"
ACCESS_CHANGED_TEXT = (
    "The call was not sent: while it waited for the tool's server, this token lost the right to run this tool "
    "(revoked, expired, or the tool withdrawn). Do not retry: tell the user the call was not made."
)


class CallStopped(Exception):
    """A call that waited is not sent after all (its caller lost access meanwhile, or that cannot be checked):
    ``result`` is the answer, ``failure`` what the audit event records."""

    def __init__(self, result: types.CallToolResult, failure: str) -> None:
        super().__init__(failure)
        self.result = result
        self.failure = failure


# Repeatable: reads, then one transaction, whose approval events carry the call's id: a re-run after a lost commit
# acknowledgement that finds one works out the same answer and writes nothing (a second approval.polled, opsux10).
@repeatable
def call_stopped_meanwhile(plan: ExecutionPlan) -> CallStopped | None:
    """Why a call that waited for its upstream may not be sent after all, or None (Z6): its caller lost the right
    (the token or person as the database stands, the tool withdrawn or changed), or the tool was reclassified to
    need an approval the call does not carry (T5: it was authorized as one that needed none). Then the approval
    gate answers as for a new call, opening the request an approver decides. A call carrying an approval is sent:
    a person approved this exact call."""
    principal, tool = plan.principal, plan.tool
    if not tool_still_executable_by(principal=principal, tool_pk=tool.pk, definition_hash=tool.definition_hash):
        return CallStopped(error_result(ACCESS_CHANGED_TEXT, access_changed=True), failure=ACCESS_CHANGED)
    if plan.approval is None:
        landed = running_again() and _approval_asked_by(plan)
        with transaction.atomic():
            _, final = _approval_gate(
                principal=principal, tool=tool, arguments=plan.arguments, approval_id=None, call_id=plan.call_id
            )
            if landed:  # the first run's request (or poll) is on the record: this run's writes would repeat it
                transaction.set_rollback(True)
        if final is not None:
            return CallStopped(final, failure=APPROVAL_NOW_REQUIRED)
    return None


def _approval_asked_by(plan: ExecutionPlan) -> bool:
    """Whether this call's check before sending committed an approval event (it carries the call's id)."""
    return AuditEvent.objects.filter(
        user=plan.principal.user, created_at__gte=plan.prepared_at, payload__call_id=plan.call_id
    ).exists()


@repeatable
@transaction.atomic
def execute_finish(
    plan: ExecutionPlan,
    result: types.CallToolResult,
    *,
    outcome: str,
    failure: str = "",
    session_renewed: bool = False,
    removed: dict[str, int] | None = None,
    unsent: bool = False,
) -> bool:
    """Record the outcome: the idempotency record (kept for an unknown outcome, freed when nothing ran), the
    approval given back when nothing of the call was sent (``_never_sent``), and the audit event (``session_renewed``:
    the server had forgotten the gateway's session, and the call went to a new one, ``UpstreamPool._send``). One
    transaction, run once more when its connection was lost (a sent call whose outcome is not written is unaudited,
    its key "running" for the TTL), unless the first run's commit landed and only its acknowledgement was lost.
    ``removed``: what the output policy took out of the answer (links, images, audio), counted in the event.
    ``unsent``: the upstream's refusal came before anything of the call was sent (``_never_sent``).
    Returns whether the approval was given back."""
    from governance.services.approvals import approval_give_back

    if running_again() and (recorded := _outcome_recorded(plan)) is not None:
        return bool(recorded.get("approval_given_back"))
    given_back = False
    if plan.approval is not None and _never_sent(failure, outcome, unsent=unsent):
        given_back = approval_give_back(request=plan.approval, principal=plan.principal)
    if plan.idempotency is not None:
        if outcome in (AuditOutcome.ERROR, AuditOutcome.DENIED) and failure:
            IdempotencyRecord.objects.filter(pk=plan.idempotency.pk).delete()  # nothing ran: the key may be reused
        else:
            IdempotencyRecord.objects.filter(pk=plan.idempotency.pk).update(
                status=IdempotencyStatus.DONE,
                result=result.model_dump_json(by_alias=True, exclude_none=True),
                completed_at=timezone.now(),
            )
    audit_record(
        event_type=AuditEventType.EXECUTION,
        principal=plan.principal,
        tool=plan.tool,
        approval=plan.approval,
        outcome=outcome,
        payload={
            "meta_tool": "execute_tool",
            "arguments_digest": plan.arguments_digest,
            "is_error": bool(result.is_error),
            "duration_ms": round((time.monotonic() - plan.started) * 1000, 1),
            "idempotency_key": plan.idempotency is not None,
            "call_id": plan.call_id,
            **({"failure": failure} if failure else {}),
            **({"approval_given_back": True} if given_back else {}),
            **({"upstream_session_renewed": True} if session_renewed else {}),
            **({"output_removed": removed} if removed else {}),
        },
    )
    # A call never sent did nothing to learn from; a call the gateway failed says nothing of the tool.
    if failure not in ("cancelled", ACCESS_CHANGED, *UNSENT_FOR_THE_DATABASE, APPROVAL_NOW_REQUIRED, GATEWAY_ERROR):
        kind = SearchOutcomeKind.SUCCESS if outcome == AuditOutcome.SUCCESS else SearchOutcomeKind.UPSTREAM_ERROR
        search_outcome_record(principal=plan.principal, tool=plan.tool, outcome=kind)
    return given_back


def _never_sent(failure: str, outcome: str, *, unsent: bool = False) -> bool:
    """Whether nothing of a failed call reached the tool's server, so an approval it used may be given back: the
    database kept it from being sent, the gateway failed before sending it (outcome "error"; once sending began
    the outcome is "unknown": the call may have run, and its approval stays used), or the upstream's side refused
    it or its client cancelled it before sending began (``unsent``: a full bulkhead, a backoff, an open circuit, a
    refused configuration, a disconnect or an MCP cancellation while it waited for a slot or a connection)."""
    if failure in UNSENT_FOR_THE_DATABASE:
        return True
    return outcome == AuditOutcome.ERROR and (failure == GATEWAY_ERROR or unsent)


def _outcome_recorded(plan: ExecutionPlan) -> dict[str, Any] | None:
    """The payload of this call's execution event if ``execute_finish`` committed its outcome, else None."""
    return (
        AuditEvent.objects.filter(
            user=plan.principal.user,
            created_at__gte=plan.prepared_at,
            event_type=AuditEventType.EXECUTION,
            payload__call_id=plan.call_id,
        )
        .values_list("payload", flat=True)
        .first()
    )


async def gateway_execute(
    *,
    principal: Principal,
    tool_id: str,
    arguments: dict[str, Any],
    pool: UpstreamPool,
    approval_id: str | None = None,
    idempotency_key: str | None = None,
) -> types.CallToolResult:
    """Run one tool call for ``principal`` and return the upstream result under the output policy
    (``output.result_for_model``), or an error result.

    The bookkeeping steps are shielded from cancellation (a client that disconnects cancels this task): a
    claimed key or a consumed approval is always followed by an audit event and a settled key. A call cut
    off after it was sent is recorded as outcome unknown, and a retry with its key is told so.
    Raises UnknownTool for an unknown or hidden tool."""
    started = time.monotonic()
    outcome = "error"
    with tracer.start_as_current_span("scout.execute_tool") as span:
        try:
            result = await _execute(
                principal=principal,
                tool_id=tool_id,
                arguments=arguments,
                pool=pool,
                approval_id=approval_id,
                idempotency_key=idempotency_key,
            )
            outcome = _metric_outcome(result)
            return result
        except UnknownTool:
            outcome = "unknown_tool"
            raise
        except anyio.get_cancelled_exc_class():
            outcome = "cancelled"
            raise
        finally:
            span.set_attribute("scout.outcome", outcome)
            EXECUTIONS.labels(outcome=outcome).inc()
            EXECUTE_SECONDS.observe(time.monotonic() - started)


def _metric_outcome(result: types.CallToolResult) -> str:
    if isinstance(result, StoredResult):
        return "repeat"
    if not result.is_error:
        return "success"
    if not isinstance(result, GatewayResult):
        return "error"  # the tool ran and reported an error: its structured keys are its own data
    structured = result.structured_content or {}
    if structured.get("service_busy"):
        return "busy"
    if structured.get("outcome_unknown"):
        return "unknown"
    if structured.get("upstream_failure"):
        return "error"
    kind = refusal_kind(result)
    if (
        kind == SearchOutcomeKind.PENDING_APPROVAL
        or structured.get("approval_pending")
        or structured.get("approval_ready")
    ):
        return "pending_approval"
    if kind == SearchOutcomeKind.DENIED:
        return "denied"
    if structured.get("invalid_arguments"):
        return "invalid"
    return "error"


async def _execute(
    *,
    principal: Principal,
    tool_id: str,
    arguments: dict[str, Any],
    pool: UpstreamPool,
    approval_id: str | None,
    idempotency_key: str | None,
) -> types.CallToolResult:
    with anyio.CancelScope(shield=True):
        try:
            plan = await run_orm_or_busy(
                execute_prepare,
                principal=principal,
                tool_id=tool_id,
                arguments=arguments,
                approval_id=approval_id,
                idempotency_key=idempotency_key,
            )
        except DatabaseBusy:
            # Locked before anything was claimed or sent (F7): the call does not run, so no audit is owed.
            return error_result(BUSY_TEXT, service_busy=True)
    if isinstance(plan, types.CallToolResult):
        return plan
    timeout = call_timeout()
    progress = CallProgress()

    async def recheck() -> None:
        try:
            stopped = await run_orm_or_busy(call_stopped_meanwhile, plan)
        except DatabaseBusy:  # fail closed: a call whose access cannot be checked again is not sent
            raise CallStopped(error_result(BUSY_TEXT, service_busy=True), failure=DATABASE_BUSY) from None
        except DatabaseError as exc:  # the same, for any other failure: never an unaudited call and a running key
            logger.error("execute_tool %s: its check before sending failed (%s)", plan.tool.tool_id, type(exc).__name__)
            raise CallStopped(error_result(BUSY_TEXT, service_busy=True), failure=DATABASE_ERROR) from None
        if stopped is not None:
            raise stopped

    try:
        with (
            tracer.start_as_current_span("scout.upstream.call", attributes={"scout.server": plan.tool.server.slug}),
            UPSTREAM_SECONDS.labels(server=plan.tool.server.slug).time(),
        ):
            result = await pool.call(
                server=plan.tool.server,
                tool_name=plan.tool.name,
                arguments=plan.arguments,
                timeout=timeout,
                progress=progress,
                tool=plan.tool,
                recheck=recheck,
                caller=plan.principal.user.pk,
            )
    except CallStopped as stop:
        outcome = AuditOutcome.ERROR if stop.failure in UNSENT_FOR_THE_DATABASE else AuditOutcome.DENIED
        if await _finish_shielded(plan, stop.result, outcome=outcome, failure=stop.failure, progress=progress):
            return _with_approval_given_back(stop.result, plan.approval)
        return stop.result
    except UpstreamCallError as exc:
        logger.warning("execute_tool %s failed upstream: %s", plan.tool.tool_id, exc)
        UPSTREAM_CALL_FAILURES.labels(server=plan.tool.server.slug, kind=exc.kind).inc()
        # Whether the call may have run decides what the model may do next: an answer it cannot read may follow a
        # write that took effect ("try again later" had it do it twice), and a server that never started ran nothing.
        if exc.outcome == "unknown":
            text = UPSTREAM_FAILURE_TEXT.get(exc.kind, FAILED_DURING_THE_CALL)
            text += READ_MAY_RUN_AGAIN if plan.reads_only else MAY_HAVE_RUN
        else:
            text = UPSTREAM_REFUSAL_TEXT.get(exc.kind, NOT_SENT)
        share = max(1, settings.SCOUT_MCP_MAX_CALLS_PER_PERSON_PER_SERVER)  # as upstreams._share reads it
        result = error_result(
            text.format(timeout=timeout, retry_in=exc.retry_in, share=share), upstream_failure=exc.kind
        )
        outcome = AuditOutcome.UNKNOWN if exc.outcome == "unknown" else AuditOutcome.ERROR
        # Refused before anything left (busy, backoff, circuit open, config): its approval is given back. Never once
        # sending began, even for an "error" (a session the server no longer knew, a connection refused).
        unsent = exc.outcome == "error" and not progress.sent
        if await _finish_shielded(plan, result, outcome=outcome, failure=exc.kind, progress=progress, unsent=unsent):
            return _with_approval_given_back(result, plan.approval)
        return result
    except anyio.get_cancelled_exc_class():
        # Never sent: nothing ran, so the key is freed for the retry. Sent: it may have run upstream.
        if progress.sent:
            await _finish_shielded(
                plan, interrupted_result(), outcome=AuditOutcome.UNKNOWN, failure="interrupted", progress=progress
            )
        else:  # nobody waits for an answer, but the approval it used is given back: the same call may come again
            result = error_result("The call was cancelled before it reached the tool's server.")
            await _finish_shielded(plan, result, outcome=AuditOutcome.ERROR, failure="cancelled", unsent=True)
        raise
    except Exception as exc:  # anything else on the way (a bug, a library's unforeseen error): audited, key settled
        # The exception's type only: its message may quote an argument or a credential.
        logger.error("execute_tool %s: the gateway failed during the call (%s)", plan.tool.tool_id, type(exc).__name__)
        result = _gateway_failed_result(sent=progress.sent, reads_only=plan.reads_only)
        outcome = AuditOutcome.UNKNOWN if progress.sent else AuditOutcome.ERROR
        if await _finish_shielded(plan, result, outcome=outcome, failure=GATEWAY_ERROR):
            return _with_approval_given_back(result, plan.approval)
        return result
    try:
        result, removed = await _answer_for(plan, result)
    except Exception as exc:  # the call ran: it is recorded whatever failed on the way back (T15)
        # The exception's type only: its message may quote the upstream's output.
        logger.error("execute_tool %s: its result could not be passed on (%s)", plan.tool.tool_id, type(exc).__name__)
        text = RESULT_NOT_SHOWN + (READ_MAY_RUN_AGAIN if plan.reads_only else MAY_HAVE_RUN)
        result = error_result(text, upstream_failure=RESULT_NOT_SHOWN_FAILURE, outcome_unknown=True)
        await _finish_shielded(
            plan, result, outcome=AuditOutcome.UNKNOWN, failure=RESULT_NOT_SHOWN_FAILURE, progress=progress
        )
        return result
    outcome = AuditOutcome.ERROR if result.is_error else AuditOutcome.SUCCESS
    await _finish_shielded(plan, result, outcome=outcome, progress=progress, removed=removed)
    return result


GATEWAY_ERROR = "gateway_error"
GATEWAY_FAILED_SENT = "The gateway failed during the call, after it began sending it to the tool's server."
GATEWAY_FAILED_UNSENT = (
    "The gateway failed before sending the call, so nothing ran. Trying again will likely fail the same way: tell the "
    "user the tool cannot be called now."
)


def _gateway_failed_result(*, sent: bool, reads_only: bool) -> types.CallToolResult:
    """The answer for a call the gateway itself failed (no upstream's failure: ``UpstreamCallError`` says those): an
    outcome unknown once sending began, as after an interruption, else nothing ran."""
    if not sent:
        return error_result(GATEWAY_FAILED_UNSENT, upstream_failure=GATEWAY_ERROR)
    text = GATEWAY_FAILED_SENT + (READ_MAY_RUN_AGAIN if reads_only else MAY_HAVE_RUN)
    return error_result(text, upstream_failure=GATEWAY_ERROR, outcome_unknown=True)


APPROVAL_GIVEN_BACK = (
    " The approval this call carried was not used up (nothing was sent): once the tool can be called again, the same "
    'call (same tool_id and arguments) with approval_id "{approval_id}" runs it before the approval expires, without '
    "asking an approver again."
)


def _with_approval_given_back(result: types.CallToolResult, approval: Any) -> types.CallToolResult:
    """``result`` of a call never sent whose approval ``execute_finish`` gave back, saying so: the model was told only
    that the call failed, and asked for a new approval an approver had already given (redteam47, opsux11)."""
    text = result.content[0].text + APPROVAL_GIVEN_BACK.format(approval_id=approval.approval_id)
    structured = {**(result.structured_content or {}), "approval_given_back": True, "approval_id": approval.approval_id}
    return error_result(text, **structured)


RESULT_NOT_SHOWN_FAILURE = "result_not_shown"
RESULT_NOT_SHOWN = "The tool's server answered the call, but the gateway could not pass its result on."


async def _answer_for(plan: ExecutionPlan, result: types.CallToolResult) -> tuple[types.CallToolResult, dict[str, int]]:
    """What the caller is answered for the upstream's ``result``: the gateway's own note for an output over the cap
    (told by its class, never by a key the upstream writes), else the result under the output policy; with what the
    policy removed (``output.result_shown``)."""
    if isinstance(result, OutputTooLarge):
        text = result.content[0].text + (ASK_FOR_LESS if plan.reads_only else OUTPUT_LOST_AFTER_A_WRITE)
        return error_result(text, output_too_large=True), {}
    # Before it is stored for a repeated key. In a worker thread: reading a megabyte of an upstream's text takes
    # tenths of a second, which the event loop every client shares would wait out. Shielded, as the step after it:
    # a call that ran is always recorded.
    secrets = server_secrets(plan.tool.server)
    with anyio.CancelScope(shield=True):
        # A REST service's structured content is the gateway's reading of its answer's text (status, JSON body).
        read_from_text = plan.tool.server.transport == Transport.OPENAPI
        result, removed = await anyio.to_thread.run_sync(
            _result_shown, result, plan.tool.tool_id, secrets, read_from_text
        )
    # Not after a REST service's error: its HTTP status says whether it may pass (a 500 often does).
    if result.is_error and plan.tool.server.transport != Transport.OPENAPI:
        result = _with_tool_error_note(result, reads_only=plan.reads_only)
    return result, removed


# After an error the tool itself reported (it ran and refused: "Invalid branch type: everything"): whether calling
# again can help, which its message rarely says. Scout's own failures say it in their text (UPSTREAM_FAILURE_TEXT).
TOOL_ERROR_NOTE = (
    "Note from the gateway: the tool ran and reported this error. The same arguments will fail the same way unless "
    "its message says the failure is temporary: change them as it says (tool_inspect gives the inputSchema), or "
    "tell the user."
)
READ_ERROR_NOTE = " It only reads, so nothing changed."
WRITE_ERROR_NOTE = " Only its message can say whether it changed anything before it failed."


def _with_tool_error_note(result: types.CallToolResult, *, reads_only: bool) -> types.CallToolResult:
    note = TOOL_ERROR_NOTE + (READ_ERROR_NOTE if reads_only else WRITE_ERROR_NOTE)
    return result.model_copy(update={"content": [*result.content, types.TextContent(type="text", text=note)]})


def _result_shown(
    result: types.CallToolResult, tool_id: str, secrets: tuple[str, ...], structure_read_from_text: bool
) -> tuple[types.CallToolResult, dict[str, int]]:
    """``result`` under the output policy, without a value Scout gave the server (its token: with it the caller could
    call the service without Scout), taken out before the cleaning (which may change it) and after (which may join
    one split by invisible characters); with what the policy removed."""
    shown, removed = result_shown(
        _secrets_removed(result, secrets), tool_id=tool_id, structure_read_from_text=structure_read_from_text
    )
    return _secrets_removed(shown, secrets), removed


def _secrets_removed(result: types.CallToolResult, secrets: tuple[str, ...]) -> types.CallToolResult:
    if not secrets:
        return result
    raw = result.model_dump(mode="json", by_alias=True, exclude_none=True)
    return types.CallToolResult.model_validate(json_secrets_removed(raw, secrets))


async def _finish_shielded(
    plan: ExecutionPlan,
    result: types.CallToolResult,
    *,
    outcome: str,
    failure: str = "",
    progress: CallProgress | None = None,
    removed: dict[str, int] | None = None,
    unsent: bool = False,
) -> bool:
    """Record the outcome, waiting out a locked database (F7): a call that reached the upstream server must
    have its audit row, so the answer waits for it (up to SCOUT_AUDIT_RETRY_SECONDS; after that the record is
    logged in full as a last resort and the error propagates). Returns whether the call's approval was given back
    (``execute_finish``)."""
    deadline = time.monotonic() + float(settings.SCOUT_AUDIT_RETRY_SECONDS)
    pause = 0.1
    with anyio.CancelScope(shield=True):
        while True:
            try:
                renewed = progress is not None and progress.session_renewed
                return await run_orm(
                    execute_finish,
                    plan,
                    result,
                    outcome=outcome,
                    failure=failure,
                    session_renewed=renewed,
                    removed=removed or {},
                    unsent=unsent,
                )
            except Exception as exc:
                if not database_busy(exc) or time.monotonic() + pause > deadline:
                    logger.error(
                        "execute_tool %s: outcome %s could not be recorded (user %s, arguments digest %s)",
                        plan.tool.tool_id,
                        outcome,
                        plan.principal.user.pk,
                        plan.arguments_digest,
                    )
                    raise
                logger.warning("execute_tool %s: database busy; recording the outcome again", plan.tool.tool_id)
            await anyio.sleep(pause)
            pause = min(pause * 2, 2.0)
