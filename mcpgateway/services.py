"""What the meta-tools do: search, inspect and execute for one verified principal.

The MCP handlers in ``tools.py`` and ``server.py`` only translate to and from the protocol; every decision
(visibility, validation, approval, idempotency, audit) is made here or in governance and search. Sync
functions here touch the ORM; ``gateway_execute`` is async and runs them through ``sync_to_async``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import jsonschema
import mcp_types as types
from asgiref.sync import sync_to_async
from django.conf import settings
from django.db import IntegrityError, transaction
from django.urls import NoReverseMatch, reverse
from django.utils import timezone

from catalog.models import Tool
from governance.choices import AuditEventType, AuditOutcome, OperationClass
from governance.principals import Principal
from governance.sanitize import clean_for_model
from governance.selectors import ToolNotFound, tool_get_for_principal, tool_pks_visible_to
from governance.services.audit import audit_record

from .choices import IdempotencyStatus
from .constants import (
    MAX_APPROVAL_ID_CHARS,
    MAX_IDEMPOTENCY_KEY_CHARS,
    MAX_INSPECT_IDS,
    MAX_QUERY_CHARS,
    TOP_K_MAX,
    TOP_K_MIN,
)
from .models import IdempotencyRecord
from .selectors import server_slugs_of
from .upstreams import UpstreamCallError, UpstreamPool, call_timeout

logger = logging.getLogger(__name__)

SUMMARY_CHARS = 200
KEY_INPUTS = 6


class GatewayInputError(Exception):
    """The caller's input cannot be served; ``str(error)`` is safe to show (it never echoes the input)."""


class UnknownTool(Exception):
    """A tool id that is unknown or hidden from the caller: one error for both, never naming the id."""


# --- presentation -------------------------------------------------------------------------------


def _policy_fields(tool: Tool) -> tuple[str, str]:
    policy = getattr(tool, "policy", None)
    if policy is None:
        return "unclassified", OperationClass.WRITE.value
    return policy.risk_class.name, policy.operation_class


def _clean_schema(node: Any) -> Any:
    """The schema with its human texts (description, title) cleaned; names and enum values kept exact."""
    if isinstance(node, dict):
        return {
            key: clean_for_model(value)
            if key in ("description", "title") and isinstance(value, str)
            else _clean_schema(value)
            for key, value in node.items()
        }
    if isinstance(node, list):
        return [_clean_schema(value) for value in node]
    return node


def _first_line(text: str) -> str:
    text = " ".join(clean_for_model(text or "").split())
    for end in (". ", "\n"):
        cut = text.find(end)
        if 0 < cut < SUMMARY_CHARS:
            return text[: cut + 1].strip()
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1].rstrip() + "…"


def tool_title(tool: Tool) -> str:
    return clean_for_model(tool.title or tool.upstream_title or tool.name)


def tool_summary(tool: Tool) -> str:
    return _first_line(tool.purpose or tool.description or tool.title or tool.name)


def key_inputs(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The first few parameters, required ones first: name, type and whether it is required."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return []
    required = set(schema.get("required") or [])
    names = sorted(properties, key=lambda name: (name not in required, list(properties).index(name)))
    inputs = []
    for name in names[:KEY_INPUTS]:
        spec = properties[name] if isinstance(properties[name], dict) else {}
        kind = spec.get("type", "any")
        inputs.append(
            {
                "name": name,
                "type": kind if isinstance(kind, str) else "|".join(map(str, kind)),
                "required": name in required,
            }
        )
    return inputs


def tool_descriptor(tool: Tool, *, why_matched: list[str] | None = None, full: bool = False) -> dict[str, Any]:
    """How a tool is shown to a model in search and inspect answers."""
    risk, operation_class = _policy_fields(tool)
    descriptor: dict[str, Any] = {
        "tool_id": tool.tool_id,
        "server": tool.server.slug,
        "title": tool_title(tool),
        "summary": tool_summary(tool),
        "key_inputs": key_inputs(tool.input_schema),
        "risk": risk,
        "operation_class": operation_class,
    }
    if why_matched is not None:
        descriptor["why_matched"] = [clean_for_model(reason) for reason in why_matched]
    descriptor["input_schema"] = _clean_schema(tool.input_schema)
    if full:
        descriptor["description"] = clean_for_model(tool.description)
        descriptor["output_schema"] = _clean_schema(tool.output_schema) if tool.output_schema else None
        descriptor["annotations"] = tool.annotations or None
        descriptor["environment"] = tool.server.environment
    return descriptor


def _compact(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


# --- tool_search --------------------------------------------------------------------------------


@dataclass
class SearchAnswer:
    matches: list[dict[str, Any]]
    degraded: bool = False
    abstained: bool = False
    notes: list[str] = field(default_factory=list)

    def structured(self) -> dict[str, Any]:
        return {"matches": self.matches, "degraded": self.degraded, "abstained": self.abstained}

    def as_result(self) -> types.CallToolResult:
        """Structured content for programs plus a compact text rendering for the model."""
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=self.text())], structured_content=self.structured()
        )

    def text(self) -> str:
        if not self.matches:
            return (
                "No tool fits this request. Rephrase it (say what should be done and to what), or tell the user "
                "no available tool can do it. Do not guess tool ids."
            )
        lines = [
            f"{len(self.matches)} matching tools, best first"
            + (" (degraded search)" if self.degraded else "")
            + ". Call execute_tool with a tool_id below and arguments that satisfy its inputSchema."
        ]
        for rank, match in enumerate(self.matches, start=1):
            lines.append(
                f"{rank}. {match['tool_id']} - {match['title']}: {match['summary']} "
                f"[risk {match['risk']}, {match['operation_class']}]"
            )
            if match.get("why_matched"):
                lines.append("   why: " + "; ".join(match["why_matched"][:3]))
            lines.append("   inputSchema: " + _compact(match["input_schema"]))
        return "\n".join(lines)


def _why_lines(why: dict[str, Any]) -> list[str]:
    """The search engine's explanation as short lines a model can read."""
    lines = []
    fields = why.get("fields") or {}
    if fields:
        lines.append("matched " + "; ".join(f"{name}: {', '.join(terms[:6])}" for name, terms in fields.items()))
    if why.get("closest") == "example" and why.get("example_request"):
        lines.append(f"close to the example request {why['example_request'][:160]!r}")
    elif why.get("closest"):
        lines.append(f"meaning close to its {why['closest']}")
    if why.get("demoted"):
        lines.append(str(why["demoted"]))
    return lines or ["closest in meaning"]


def _fallback_hits(query: str, visible: frozenset[int], top_k: int) -> list[tuple[int, list[str]]]:
    """No index: rank the visible tools by words they share with the query (degraded, permission-filtered)."""
    words = {word for word in re.findall(r"[a-z0-9]+", query.lower()) if len(word) > 2}
    scored = []
    rows = Tool.objects.filter(pk__in=visible).values_list("pk", "tool_id", "title", "description", "purpose")
    for pk, tool_id, title, description, purpose in rows:
        text = " ".join((tool_id.replace("_", " "), title, purpose, description)).lower()
        shared = sorted(words & set(re.findall(r"[a-z0-9]+", text)))
        if shared:
            scored.append((-len(shared), tool_id, pk, shared))
    scored.sort()
    return [(pk, [f"shares the words: {', '.join(shared[:6])}"]) for _, _, pk, shared in scored[:top_k]]


def _ranked(query: str, visible: frozenset[int], top_k: int) -> tuple[list[tuple[int, list[str]]], bool, bool]:
    """``(hits, degraded, abstained)``; hits are (tool pk, why lines), best first, all inside ``visible``."""
    from search.services import SearchQueryError, tool_search

    try:
        result = tool_search(query=query, visible=visible, top_k=top_k)
    except SearchQueryError as exc:
        raise GatewayInputError(str(exc)) from None
    if not result.index_ready:
        return _fallback_hits(query, visible, top_k), True, False
    hits = [(m.tool_pk, _why_lines(m.why_matched)) for m in result.matches if m.tool_pk in visible]
    return hits[:top_k], bool(result.degraded), bool(result.abstained)


def search_answer(
    *,
    principal: Principal,
    query: str,
    top_k: int = 5,
    operation_class: str | None = None,
    environment: str | None = None,
    scope: str = "all",
) -> SearchAnswer:
    """The tool_search answer for ``principal``, without an audit event (reports use this; the meta-tool
    uses ``gateway_search``). Raises GatewayInputError for an empty/oversized query or bad filters."""
    if not isinstance(query, str) or not query.strip():
        raise GatewayInputError("query is empty: describe the step you need a tool for, in plain words")
    if len(query) > MAX_QUERY_CHARS:
        raise GatewayInputError(f"query is longer than {MAX_QUERY_CHARS} characters; describe one step briefly")
    if operation_class is not None and operation_class not in OperationClass.values:
        raise GatewayInputError(f"operation_class must be one of: {', '.join(OperationClass.values)}")
    if scope not in ("all", "my_servers"):
        raise GatewayInputError('scope must be "all" or "my_servers"')
    if environment is not None and (not isinstance(environment, str) or len(environment) > 50):
        raise GatewayInputError("environment must be a short name such as production or development")
    top_k = max(TOP_K_MIN, min(TOP_K_MAX, int(top_k)))
    visible = tool_pks_visible_to(
        principal=principal,
        operation_class=operation_class,
        environment=environment or None,
        server_slugs=server_slugs_of(principal=principal) if scope == "my_servers" else None,
    )
    hits, degraded, abstained = _ranked(query.strip(), visible, top_k)
    tools = Tool.objects.select_related("server", "policy__risk_class").in_bulk([pk for pk, _ in hits])
    matches = [tool_descriptor(tools[pk], why_matched=why) for pk, why in hits if pk in tools]
    return SearchAnswer(matches=matches, degraded=degraded, abstained=abstained)


def gateway_search(
    *,
    principal: Principal,
    query: str,
    top_k: int = 5,
    operation_class: str | None = None,
    environment: str | None = None,
    scope: str = "all",
) -> SearchAnswer:
    """tool_search: ``search_answer`` plus a discovery audit event. Raises GatewayInputError."""
    answer = search_answer(
        principal=principal,
        query=query,
        top_k=top_k,
        operation_class=operation_class,
        environment=environment,
        scope=scope,
    )
    top_k = max(TOP_K_MIN, min(TOP_K_MAX, int(top_k)))
    matches = answer.matches
    audit_record(
        event_type=AuditEventType.DISCOVERY,
        principal=principal,
        outcome=AuditOutcome.SUCCESS,
        payload={
            "meta_tool": "tool_search",
            "query_chars": len(query),
            "top_k": top_k,
            "scope": scope,
            "returned": [match["tool_id"] for match in matches],
            "degraded": answer.degraded,
            "abstained": answer.abstained,
        },
    )
    return answer


# --- tool_inspect -------------------------------------------------------------------------------


def gateway_inspect(*, principal: Principal, tool_ids: list[str]) -> list[dict[str, Any]]:
    """Full definitions of visible tools. Raises UnknownTool if any id is unknown or hidden,
    GatewayInputError for an empty or too long list."""
    if not isinstance(tool_ids, list) or not tool_ids:
        raise GatewayInputError("tool_ids is empty: pass tool ids returned by tool_search")
    if len(tool_ids) > MAX_INSPECT_IDS:
        raise GatewayInputError(f"pass at most {MAX_INSPECT_IDS} tool ids")
    tools = []
    for tool_id in dict.fromkeys(tool_ids):
        try:
            tools.append(tool_get_for_principal(principal=principal, tool_id=tool_id, permission="discover"))
        except ToolNotFound:
            _audit_unknown(principal, "tool_inspect")
            raise UnknownTool() from None
    audit_record(
        event_type=AuditEventType.DISCOVERY,
        principal=principal,
        outcome=AuditOutcome.SUCCESS,
        payload={"meta_tool": "tool_inspect", "returned": [tool.tool_id for tool in tools]},
    )
    return [tool_descriptor(tool, full=True) for tool in tools]


def _audit_unknown(principal: Principal, meta_tool: str) -> None:
    # The asked-for id is not recorded: it may be hostile text, and the event must look the same either way.
    audit_record(
        event_type=AuditEventType.DISCOVERY if meta_tool == "tool_inspect" else AuditEventType.EXECUTION,
        principal=principal,
        outcome=AuditOutcome.DENIED,
        payload={"meta_tool": meta_tool, "reason": "unknown_tool"},
    )


# --- execute_tool -------------------------------------------------------------------------------


def error_result(text: str, **structured: Any) -> types.CallToolResult:
    """An isError tool result the model can act on."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured or None,
        is_error=True,
    )


def canonical_arguments(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _path(error: jsonschema.ValidationError) -> str:
    path = "arguments"
    for part in error.absolute_path:
        path += f"[{part}]" if isinstance(part, int) else f".{part}"
    return path


def _schema_error_text(error: jsonschema.ValidationError, schema: dict[str, Any]) -> str:
    """Names the failing path and the rule, never the rejected value (it is the caller's data)."""
    where = _path(error)
    validator, expected = error.validator, error.validator_value
    if validator == "required":
        missing = [name for name in expected if isinstance(error.instance, dict) and name not in error.instance]
        return f"{where}: missing required propert{'y' if len(missing) == 1 else 'ies'} {', '.join(missing)}"
    if validator == "additionalProperties":
        allowed = sorted((error.schema.get("properties") or {}).keys())
        return f"{where}: has properties the schema does not allow (allowed: {', '.join(allowed) or 'none'})"
    if validator == "type":
        return f"{where}: must be of type {expected if isinstance(expected, str) else ' or '.join(expected)}"
    if validator == "enum":
        return f"{where}: must be one of {_compact(expected)[:300]}"
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
        return f"{where}: fails {validator} {_compact(expected)[:200]}"
    return f"{where}: does not satisfy the schema's {validator!r} rule"


def arguments_problem(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """A message naming the first failing path, or None when ``arguments`` satisfy ``schema``."""
    try:
        validator_class = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
        validator = validator_class(schema)
        errors = sorted(
            validator.iter_errors(arguments), key=lambda e: (len(e.absolute_path), list(map(str, e.absolute_path)))
        )
    except (jsonschema.SchemaError, RecursionError, TypeError, ValueError):
        return "the tool's input schema cannot be used to check arguments; ask an operator to re-sync the server"
    if not errors:
        return None
    return _schema_error_text(errors[0], schema)


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


def _principal_key(principal: Principal) -> str:
    return f"u{principal.user.pk}|a:{principal.agent}|t:{principal.tenant}"


def _approval_url(approval: Any) -> str:
    try:
        path = reverse("admin:governance_approvalrequest_decide", args=[approval.pk])
    except NoReverseMatch:
        path = "/admin/governance/approvalrequest/"
    return f"{settings.SCOUT_PUBLIC_URL}{path}"


def _approval_gate(
    *, principal: Principal, tool: Tool, arguments: dict[str, Any], approval_id: str | None
) -> tuple[Any, types.CallToolResult | None]:
    """``(approval, None)`` when the call may run (approval None if none is needed), else ``(None, result)``.

    governance.call_authorize re-authorizes and applies the policy: it opens a pending request when an
    approval is needed, or consumes the given one atomically (once, for these exact arguments)."""
    from governance.services.approvals import ApprovalError, ArgumentsNotCanonical
    from governance.services.authorize import call_authorize

    if approval_id is not None and (not isinstance(approval_id, str) or len(approval_id) > MAX_APPROVAL_ID_CHARS):
        return None, error_result("approval_id is not valid; call again without it to request a new approval")
    try:
        decision = call_authorize(
            principal=principal, tool_id=tool.tool_id, arguments=arguments, approval_id=approval_id
        )
    except ToolNotFound:
        raise UnknownTool() from None
    except ArgumentsNotCanonical as exc:
        return None, error_result(f"Invalid arguments: {exc}")
    except ApprovalError as exc:
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
        f"An approver decides at {url} . Once it is approved, call execute_tool again with the same tool_id, "
        f'the same arguments and approval_id "{request.approval_id}". Do not retry before then.',
        approval_required=True,
        approval_id=request.approval_id,
        approval_url=url,
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
        return None, error_result(
            "idempotency_key was already used for a different call (other tool or arguments); use a new key",
            idempotency_mismatch=True,
        )
    if existing.status == IdempotencyStatus.RUNNING:
        return None, error_result(
            "A call with this idempotency_key is still running; wait for it instead of sending it again",
            idempotency_conflict=True,
        )
    return None, types.CallToolResult.model_validate(existing.result)


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
    try:
        tool = tool_get_for_principal(principal=principal, tool_id=tool_id, permission="execute")
    except ToolNotFound:
        _audit_unknown(principal, "execute_tool")
        raise UnknownTool() from None
    if not isinstance(arguments, dict):
        return error_result("arguments must be a JSON object")
    try:
        canonical = canonical_arguments(arguments)
    except (ValueError, TypeError, RecursionError):
        return error_result("arguments must be plain JSON (no NaN or Infinity)")
    if len(canonical.encode()) > settings.SCOUT_MCP_MAX_ARGUMENT_BYTES:
        return _denied(
            principal,
            tool,
            "arguments_too_large",
            error_result(
                f"arguments are larger than {settings.SCOUT_MCP_MAX_ARGUMENT_BYTES} bytes; send less data per call"
            ),
        )
    problem = arguments_problem(tool.input_schema or {}, arguments)
    if problem is not None:
        return _denied(
            principal,
            tool,
            "invalid_arguments",
            error_result(
                f"Invalid arguments: {problem}. Check the tool's inputSchema and call again.", invalid_arguments=True
            ),
        )
    digest = hashlib.sha256(canonical.encode()).hexdigest()
    if idempotency_key is not None and (
        not isinstance(idempotency_key, str) or not idempotency_key or len(idempotency_key) > MAX_IDEMPOTENCY_KEY_CHARS
    ):
        return error_result(f"idempotency_key must be a non-empty string of at most {MAX_IDEMPOTENCY_KEY_CHARS} chars")
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
        approval, final = _approval_gate(principal=principal, tool=tool, arguments=arguments, approval_id=approval_id)
        if final is not None:
            return final
        if idempotency_key is not None:
            record, final = _idempotency_claim(principal, idempotency_key, tool, digest)
            if final is not None:
                transaction.set_rollback(True)  # keep the approval unused: this call does not run
                return final
    return ExecutionPlan(
        principal=principal,
        tool=tool,
        arguments=arguments,
        arguments_digest=digest,
        approval=approval,
        idempotency=record,
    )


def _denied(principal: Principal, tool: Tool, reason: str, result: types.CallToolResult) -> types.CallToolResult:
    audit_record(
        event_type=AuditEventType.EXECUTION,
        principal=principal,
        tool=tool,
        outcome=AuditOutcome.DENIED,
        payload={"meta_tool": "execute_tool", "reason": reason},
    )
    return result


UPSTREAM_FAILURE_TEXT = {
    "timeout": "The tool did not answer within {timeout:g} s and the call was cancelled. It may or may not have "
    "taken effect; check before trying again.",
    "closed": "The tool's server stopped during the call; it is being restarted. The call may or may not have "
    "taken effect; check before trying again.",
    "busy": "The tool's server has too many calls in flight; try again shortly.",
    "backoff": "The tool's server failed recently and is restarting; try again in a few seconds.",
}


def execute_finish(plan: ExecutionPlan, result: types.CallToolResult, *, outcome: str, failure: str = "") -> None:
    """Record the outcome: the idempotency record (kept for an unknown outcome, freed when nothing ran) and the
    audit event."""
    if plan.idempotency is not None:
        if outcome == AuditOutcome.ERROR and failure:
            IdempotencyRecord.objects.filter(pk=plan.idempotency.pk).delete()  # nothing ran: the key may be reused
        else:
            IdempotencyRecord.objects.filter(pk=plan.idempotency.pk).update(
                status=IdempotencyStatus.DONE,
                result=result.model_dump(mode="json", by_alias=True, exclude_none=True),
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
            **({"failure": failure} if failure else {}),
        },
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
    """Run one tool call for ``principal`` and return the upstream result unchanged (or an error result).

    Raises UnknownTool for an unknown or hidden tool."""
    plan = await sync_to_async(execute_prepare)(
        principal=principal,
        tool_id=tool_id,
        arguments=arguments,
        approval_id=approval_id,
        idempotency_key=idempotency_key,
    )
    if isinstance(plan, types.CallToolResult):
        return plan
    timeout = call_timeout()
    try:
        result = await pool.call(
            server=plan.tool.server, tool_name=plan.tool.name, arguments=plan.arguments, timeout=timeout
        )
    except UpstreamCallError as exc:
        logger.warning("execute_tool %s failed upstream: %s", plan.tool.tool_id, exc)
        text = UPSTREAM_FAILURE_TEXT.get(exc.kind, "The tool's server could not be reached; try again later.")
        result = error_result(text.format(timeout=timeout), upstream_failure=exc.kind)
        outcome = AuditOutcome.UNKNOWN if exc.outcome == "unknown" else AuditOutcome.ERROR
        await sync_to_async(execute_finish)(plan, result, outcome=outcome, failure=exc.kind)
        return result
    outcome = AuditOutcome.ERROR if result.is_error else AuditOutcome.SUCCESS
    await sync_to_async(execute_finish)(plan, result, outcome=outcome)
    return result
