"""Discovery for one verified principal: tool_search answers and tool_inspect definitions.

Everything shown to a model passes through ``text_for_model`` (governance's ``clean_for_model``, links defanged).
Search owns the search itself (``search.services.search_for_principal``: validation, limits, visibility, ranking,
confidence, fallback); the gateway formats its answer and audits.
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import mcp_types as types
from django.db import connections, router
from opentelemetry import trace

from catalog.definitions import tool_deprecated
from catalog.models import Tool
from governance.cache import visibility_row_read_once, visibility_row_token
from governance.choices import AuditEventType, AuditOutcome, OperationClass, Reversibility
from governance.modeltext import (
    SUBSCHEMA,
    SUBSCHEMA_LISTS,
    SUBSCHEMA_MAPS,
    schema_texts_for_model,
    text_for_model,
    texts_for_model,
)
from governance.principals import Principal
from governance.selectors import (
    Permission,
    ToolNotFound,
    servers_not_serving_for,
    tool_get_for_principal,
    tool_server_not_serving,
    tools_visible_to,
)
from governance.services.audit import audit_record
from search.backends import SearchResult
from search.choices import EmptyAnswerReason
from search.engine.ranking import Confidence
from search.services import TOP_K_DEFAULT, TOP_K_MAX, TOP_K_MIN, SearchQueryError, search_for_principal
from search.text import close_tool_ids, function_word, tokenize
from search.usage import search_observe

from ..constants import MAX_INSPECT_IDS, MAX_TOOL_ID_CHARS, SERVER_NOT_SERVING_WHY
from ..selectors import tool_not_serving_for_client_name

logger = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)  # a no-op until scoutsite.tracing configures OpenTelemetry

SUMMARY_CHARS = 200
KEY_INPUTS = 6


class GatewayInputError(Exception):
    """The caller's input cannot be served; ``str(error)`` is safe to show (it never echoes the input).
    ``field``: the request field at fault, when one is."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True)
class NotServing:
    """A tool id of the caller's own whose server is not serving now (``tool_server_not_serving``): said as such,
    not as unknown, so the caller knows whether to try again. ``position``: in a tool_inspect of several ids."""

    tool_id: str
    server_slug: str
    status: str
    position: int | None = None


class UnknownTool(Exception):
    """A tool id that is unknown or hidden from the caller: one error for both. ``asked``: for a tool_inspect
    of several ids, the unknown ones as (position in tool_ids, the id as sent) — the caller's own input,
    the same whether a tool is hidden or does not exist; empty otherwise (the error names no id). ``found``: the
    definitions of the other ids of that tool_inspect, which the caller still gets. ``closest``: per id as sent,
    the caller's visible tool ids it most likely meant (``tool_ids_close_to``), when any is close. ``not_serving``:
    ids of tools the caller could use but whose server is not serving (never a hidden tool's)."""

    def __init__(
        self,
        asked: list[tuple[int, str]] | None = None,
        found: list[dict[str, Any]] | None = None,
        closest: dict[str, list[str]] | None = None,
        not_serving: list[NotServing] | None = None,
    ) -> None:
        super().__init__()
        self.asked = asked or []
        self.found = found or []
        self.closest = closest or {}
        self.not_serving = not_serving or []


def tool_not_serving(
    *, principal: Principal, tool_id: str, permission: Permission, position: int | None = None
) -> NotServing | None:
    """``tool_id`` as a ``NotServing`` when it names a tool of the caller's on a server not serving; None otherwise."""
    server = tool_server_not_serving(principal=principal, tool_id=tool_id, permission=permission)
    if server is None:
        return None
    return NotServing(tool_id=tool_id, server_slug=server.slug, status=server.status, position=position)


def tool_name_not_serving(*, principal: Principal, name: str) -> NotServing | None:
    """A directly listed tool's name (``server__tool``) as a ``NotServing`` when it names the caller's tool on a
    server not serving (audited as execute_tool's such denial); None otherwise, a hidden tool's name included."""
    tool = tool_not_serving_for_client_name(principal=principal, name=name)
    if tool is None:
        return None
    _audit_unknown(principal, "execute_tool", "server_not_serving")
    return NotServing(tool_id=tool.tool_id, server_slug=tool.server.slug, status=tool.server.status)


def tool_ids_close_to(*, principal: Principal, typed: list[str], permission: Permission) -> dict[str, list[str]]:
    """Per mistyped id, the ids of tools ``principal`` may use that it most likely meant ("everything::get_sum"
    for "everything::get-sum", "get_current_time" for "time::get_current_time"); ids with none close are left out.
    Only the caller's own visible tools are compared, so a hidden tool never changes the answer (Z2, Z4)."""
    typed = [tool_id for tool_id in typed if isinstance(tool_id, str) and 0 < len(tool_id) <= MAX_TOOL_ID_CHARS]
    if not typed:
        return {}
    visible = list(tools_visible_to(principal=principal, permission=permission).values_list("tool_id", flat=True))
    closest = {tool_id: close_tool_ids(tool_id, visible) for tool_id in typed}
    return {tool_id: ids for tool_id, ids in closest.items() if ids}


# --- presentation -------------------------------------------------------------------------------


def _policy_fields(tool: Tool) -> tuple[str, str]:
    policy = getattr(tool, "policy", None)
    if policy is None:
        return "unclassified", OperationClass.WRITE.value
    return policy.risk_class.name, policy.operation_class


# The hints Scout decides from its own classification (the tool's policy): an upstream's claim to be read-only
# or harmless is a hint Scout already weighed (governance.classification) and an admin may have overruled.
POLICY_HINTS = ("readOnlyHint", "destructiveHint")
MCP_ASSUMED = {"readOnlyHint": False, "destructiveHint": True}  # a client's reading of a hint left out


def tool_hints(tool: Tool) -> dict[str, Any]:
    """The MCP annotations a client is shown for ``tool``: readOnlyHint and destructiveHint from Scout's
    classification (a read tool is read-only; an irreversible one destructive), never its own claims; the
    upstream's other hints as it declared them, every text in them cleaned (``text_for_model``). Empty for a tool
    that declares none and that Scout classifies as MCP assumes of such a tool (a destructive write)."""
    declared = tool.annotations if isinstance(tool.annotations, dict) else {}
    hints = texts_for_model({key: value for key, value in declared.items() if key not in POLICY_HINTS})
    policy = getattr(tool, "policy", None)
    if policy is None:
        return hints
    read = policy.operation_class == OperationClass.READ
    decided = {"readOnlyHint": read}
    if not read:  # MCP: destructiveHint means something only for a tool that is not read-only
        decided["destructiveHint"] = policy.reversibility == Reversibility.IRREVERSIBLE
    for key, value in decided.items():
        # A hint the upstream gave is answered (confirmed or overruled); one it left out is said only when it
        # differs from what MCP assumes without it (not read-only, destructive): no defaults spelled out.
        if key in declared or value != MCP_ASSUMED[key]:
            hints[key] = value
    return hints


# Keywords that exist in only one of the JSON Schema drafts in use (draft-07, 2020-12): a schema with any of
# them keeps its "$schema" (MCP reads a schema without one as 2020-12).
_DIALECT_BOUND = re.compile(
    r'"(?:additionalItems|dependencies|dependentRequired|dependentSchemas|prefixItems|unevaluatedItems|'
    r'unevaluatedProperties|\$recursiveRef|\$dynamicRef)"\s*:|"items"\s*:\s*\['
)


# The title pydantic gives a function's arguments ("logArguments" for the function log behind git_log): the
# upstream's own function name, which need not be the tool's, so _compact's restated-name rule misses it.
_ARGUMENTS_TITLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*Arguments")


def _letters(text: str) -> str:
    return "".join(filter(str.isalnum, text.lower()))


def _restates(title: str, name: str) -> bool:
    """Whether ``title`` only says ``name`` again (its letters and digits, case aside), or ``name`` + "Arguments".
    Asked only of a node that has a title: the name's letters were once worked out for every node of every schema
    shown, most with no title (issue 9: compaction 0.0107 -> 0.0040 ms of CPU per schema at 10k tools)."""
    letters = _letters(name)
    return _letters(title) in (letters, letters + "arguments")


def _compact(node: Any, name: str | None) -> Any:
    """``node`` without the titles that only restate the name they sit under: pydantic's "Timezone" for the
    property timezone, "get_timeArguments" for the tool get_time (``name`` is the property, definition or
    tool name)."""
    if not isinstance(node, dict):
        return node
    shown: dict[str, Any] = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str) and name and _restates(value, name):
            continue
        if key in SUBSCHEMA_MAPS and isinstance(value, dict):
            value = {child: _compact(spec, child) for child, spec in value.items()}
        elif key in SUBSCHEMA_LISTS and isinstance(value, list):
            value = [_compact(spec, name) for spec in value]  # a branch restates the same name
        elif key in SUBSCHEMA and isinstance(value, dict | list):
            value = [_compact(spec, None) for spec in value] if isinstance(value, list) else _compact(value, None)
        shown[key] = value
    return _plain_optional(shown)


_NULL = {"type": "null"}


def _plain_optional(node: dict[str, Any]) -> dict[str, Any]:
    """pydantic's optional parameter, ``{"anyOf": [{"type": "string"}, {"type": "null"}], "default": null}``, shown
    as its plain type ``{"type": "string"}``: null and leaving it out mean the same (its default is null), and a
    model leaves it out. 12 tokens a parameter, in every answer that shows the schema (git_log has two). Arguments
    are still checked against the stored schema, so a host that sends null is not refused."""
    branches = node.get("anyOf")
    if (
        not isinstance(branches, list)
        or len(branches) != 2
        or _NULL not in branches
        or node.get("default", 0) is not None
    ):
        return node
    typed = next(branch for branch in branches if branch != _NULL)
    if not isinstance(typed, dict) or any(key in node for key in typed if key != "description"):
        return node
    plain = {key: value for key, value in node.items() if key not in ("anyOf", "default")}
    return {**typed, **plain}


def schema_for_model(schema: Any, *, name: str) -> Any:
    """A tool's schema as Scout shows it (search answers, tool_inspect, the direct listing): human texts cleaned,
    titles that only restate a name dropped (a generated "…Arguments" one too), and "$schema" dropped unless the
    schema uses a keyword whose meaning depends on the draft. Only annotations go: what the schema allows is
    unchanged (and arguments are checked against the stored schema)."""
    if not isinstance(schema, dict):
        return schema_texts_for_model(schema)
    shown = _compact(schema, name)
    if isinstance(shown.get("title"), str) and _ARGUMENTS_TITLE.fullmatch(shown["title"]):
        del shown["title"]
    if "$schema" in shown and not _DIALECT_BOUND.search(compact_json(shown)):
        del shown["$schema"]
    return schema_texts_for_model(shown)


def _first_line(text: str) -> str:
    text = " ".join(text_for_model(text or "").split())
    for end in (". ", "\n"):
        cut = text.find(end)
        if 0 < cut < SUMMARY_CHARS:
            return text[: cut + 1].strip()
    return text if len(text) <= SUMMARY_CHARS else text[: SUMMARY_CHARS - 1].rstrip() + "…"


# A server's note as a search answer shows it, cut: an operator's text, shown once per server of an answer.
SERVER_NOTE_CHARS = 300


def server_note(description: str) -> str:
    """The operator's note on a server (its description) as answers show it: cleaned, on one line, cut. It may
    say what the tools' arguments refer to (the demo's git server: which repository repo_path must name)."""
    text = " ".join(text_for_model(description or "").split())
    return text if len(text) <= SERVER_NOTE_CHARS else text[: SERVER_NOTE_CHARS - 1].rstrip() + "…"


def _title(*, title: str, upstream_title: str, name: str) -> str:
    return text_for_model(title or upstream_title or name)


def _summary(*, purpose: str, description: str, title: str, name: str) -> str:
    return _first_line(purpose or description or title or name)


def key_inputs(schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The first few parameters, required ones first: name, type and whether it is required."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return []
    required = set(schema.get("required") or [])
    names = sorted(properties, key=lambda name: (name not in required, list(properties).index(name)))
    inputs = []
    for name in names[:KEY_INPUTS]:
        inputs.append({"name": name, "type": _type_of(properties[name]), "required": name in required})
    return inputs


def _type_of(spec: Any) -> str:
    """A parameter's JSON type as one short word: "string", "string|null" (a list of types, or the branches of
    an anyOf/oneOf such as pydantic's optional parameters), "any" when the schema does not say."""
    if not isinstance(spec, dict):
        return "any"
    kind = spec.get("type")
    if isinstance(kind, str):
        return kind
    if isinstance(kind, list) and kind:
        return "|".join(map(str, kind))
    branches = spec.get("anyOf") or spec.get("oneOf")
    if isinstance(branches, list) and branches:
        kinds = [_type_of(branch) for branch in branches]
        return "any" if "any" in kinds else "|".join(dict.fromkeys(kinds))
    return "any"


def tool_descriptor(tool: Tool, *, why_matched: list[str] | None = None, full: bool = False) -> dict[str, Any]:
    """How a tool is shown to a model in search and inspect answers."""
    policy = getattr(tool, "policy", None)
    descriptor = _descriptor(
        tool_id=tool.tool_id,
        server=tool.server.slug,
        name=tool.name,
        title=tool.title,
        upstream_title=tool.upstream_title,
        purpose=tool.purpose,
        description=tool.description,
        deprecated=tool.deprecated,
        input_schema=tool.input_schema,
        policy=None if policy is None else (policy.risk_class.name, policy.operation_class, policy.needs_approval),
        why_matched=why_matched,
        full=full,
    )
    if full:
        # Only what the tool has: a model reads "output_schema": null or "annotations": null as something said.
        # A description that is its summary already (a one-sentence description) is not said twice.
        description = text_for_model(tool.description)
        details = {
            "description": "" if " ".join(description.split()) == descriptor["summary"] else description,
            "output_schema": schema_for_model(tool.output_schema, name=tool.name) if tool.output_schema else None,
            "annotations": tool_hints(tool),
            "environment": tool.server.environment,
            # The operator's note on the server, which may say what its tools' arguments refer to (the demo's
            # git server: which repository repo_path must name); without it a model could only guess.
            "server_description": text_for_model(tool.server.description),
        }
        descriptor.update({key: value for key, value in details.items() if value})
    return descriptor


def _descriptor(
    *,
    tool_id: str,
    server: str,
    name: str,
    title: str,
    upstream_title: str,
    purpose: str,
    description: str,
    deprecated: bool,
    input_schema: Any,
    policy: tuple[str, str, bool] | None,
    why_matched: list[str] | None = None,
    full: bool = False,
) -> dict[str, Any]:
    """``tool_descriptor`` (without a full definition's details) from plain values: a tool's own columns, its
    server's slug, whether it is deprecated (``Tool.deprecated``) and its policy as (risk class name, operation
    class, whether a call needs approval; None: no policy). Search answers build theirs from one read of these
    values (``SearchDescriptors``), tool_inspect and the REST API from model instances: one function, one shape."""
    risk, operation_class = ("unclassified", OperationClass.WRITE.value) if policy is None else policy[:2]
    descriptor: dict[str, Any] = {
        "tool_id": tool_id,
        "server": server,
        "title": _title(title=title, upstream_title=upstream_title, name=name),
        "summary": _summary(purpose=purpose, description=description, title=title, name=name),
    }
    if not full:  # a full definition has the whole input_schema: its first parameters are not said again
        descriptor["key_inputs"] = key_inputs(input_schema)
    descriptor.update(risk=risk, operation_class=operation_class)
    if policy is not None and policy[2]:  # said only when true: a call waits for a person
        descriptor["needs_approval"] = True
    # Said only when true, as search reads it (ranked below its replacement): the summary, a first sentence, often
    # leaves out the upstream's "DEPRECATED: use X instead".
    if deprecated:
        descriptor["deprecated"] = True
    if why_matched is not None:
        descriptor["why_matched"] = [text_for_model(reason) for reason in why_matched]
    descriptor["input_schema"] = schema_for_model(input_schema, name=name)
    return descriptor


# A descriptor's fields that MCP itself names (a Tool's inputSchema, outputSchema), as an MCP answer spells them:
# its text said "inputSchema" while its JSON said "input_schema", two names for one thing. The REST API keeps
# its documented snake_case fields (its OpenAPI schema).
MCP_FIELD_NAMES = {"input_schema": "inputSchema", "output_schema": "outputSchema"}


# tool_inspect's outputSchema of a tool whose results have the very schema of its arguments (server-memory's
# create_entities and create_relations answer with what they created): said once. The whole schema again was about
# 100 tokens of an inspect answer of about 315, telling a model nothing its inputSchema had not (agentux17).
OUTPUT_AS_INPUT = "same as inputSchema"


def for_mcp(descriptor: dict[str, Any]) -> dict[str, Any]:
    """``descriptor`` (from ``tool_descriptor``) as an MCP answer shows it: MCP's names for MCP's fields, and an
    output_schema equal to the input_schema as ``OUTPUT_AS_INPUT``. Only what a model reads: no client checks a
    result against it (execute_tool declares no outputSchema; the direct listing and REST keep the schema)."""
    shown = {MCP_FIELD_NAMES.get(key, key): value for key, value in descriptor.items()}
    if "output_schema" in descriptor and descriptor["output_schema"] == descriptor.get("input_schema"):
        shown["outputSchema"] = OUTPUT_AS_INPUT
    return shown


def compact_json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


# --- tool_search --------------------------------------------------------------------------------


NO_TOOL_FITS = (
    "No tool fits this request. Rephrase it (say what should be done and to what), or tell the user "
    "no available tool can do it. Do not guess tool ids."
)
NO_TOOL_FITS_FILTERED = (
    "No tool fits this request with the filters you set ({filters}). Search again without them, or rephrase "
    "the request (say what should be done and to what). Do not guess tool ids."
)
NO_TOOL_GRANTED = (
    "No tool is available to this token: nothing is granted to it yet. Tell the user to ask a Scout operator "
    "for access to the tools they need. Do not guess tool ids."
)
# Search clamps top_k to TOP_K_MIN..TOP_K_MAX; the answer says so (never echoing the number asked for).
TOP_K_CAPPED = f"top_k is above the maximum: capped at {TOP_K_MAX}."
TOP_K_RAISED = f"top_k is below the minimum: raised to {TOP_K_MIN}."
# A high-confidence answer carries the inputSchema of its first matches only: a top_k of 20 gave 13 full schemas
# (1,233 tokens for one demo search, 3x a default answer) for tools the model mostly does not call.
SCHEMAS_SHOWN = TOP_K_DEFAULT
# Said when any match of a high-confidence answer shows its key inputs only (past the first SCHEMAS_SHOWN, or
# below the dynamic cut's floor).
SCHEMAS_CUT = "Matches with inputs only: tool_inspect gives their inputSchema, before calling one."
LOW_CONFIDENCE = (
    "Low confidence: none of these clearly fits. If one does, call tool_inspect with its tool_id for its "
    "inputSchema before calling it; otherwise rephrase the request (what should be done, to what) or tell the "
    "user no tool fits."
)


@dataclass
class SearchAnswer:
    matches: list[dict[str, Any]]
    degraded: bool = False
    # search's decision, shown as is: high, low (no schemas: inspect the one that fits, or rephrase) or none
    confidence: str = Confidence.HIGH.value
    # lines about the request itself (top_k clamped), in the text and, when there are any, the structure
    notes: list[str] = field(default_factory=list)
    # the names of the filters the caller narrowed the search with (operation_class, environment, scope)
    filters: list[str] = field(default_factory=list)
    nothing_granted: bool = False  # the caller may discover no tool at all (its own access, nobody else's)
    # server slug -> its operator's note (``server_note``), for the servers of the matches shown with an
    # inputSchema: what a model needs to call them right the first time (which repository repo_path names)
    server_descriptions: dict[str, str] = field(default_factory=dict)

    @property
    def abstained(self) -> bool:
        return self.confidence == Confidence.NONE

    def empty_reason(self) -> str:
        """Why no tool was returned, for the query log (an ``EmptyAnswerReason``; "" when tools were): the
        caller's own filters or access, or the search withheld its answer (a gap a curator can close)."""
        if self.matches:
            return ""
        if self.filters:
            return EmptyAnswerReason.FILTERED
        if self.nothing_granted:
            return EmptyAnswerReason.NOTHING_VISIBLE
        return EmptyAnswerReason.WITHHELD

    def structured(self) -> dict[str, Any]:
        structured = {
            "matches": self.matches,
            "confidence": self.confidence,
            "degraded": self.degraded,
            "abstained": self.abstained,
        }
        if self.notes:
            structured["notes"] = self.notes
        if self.server_descriptions:
            structured["server_descriptions"] = self.server_descriptions
        return structured

    def as_result(self) -> types.CallToolResult:
        """Structured content for programs plus a compact text rendering for the model (MCP's field names)."""
        structured = {**self.structured(), "matches": [for_mcp(match) for match in self.matches]}
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=self.text())], structured_content=structured
        )

    def text(self) -> str:
        if not self.matches and self.nothing_granted:
            return "\n".join([NO_TOOL_GRANTED, *self.notes])
        if not self.matches:
            empty = NO_TOOL_FITS_FILTERED.format(filters=", ".join(self.filters)) if self.filters else NO_TOOL_FITS
            return "\n".join([empty, *self.notes])
        count = len(self.matches)
        low = self.confidence == Confidence.LOW  # none of them clearly fits: no schemas, the key inputs only
        head = f"{count} {'closest' if low else 'matching'} tool{'' if count == 1 else 's'}, best first"
        head += " (degraded search)" if self.degraded else ""
        call = "" if low else " Call execute_tool with a tool_id below and arguments that satisfy its inputSchema."
        lines = [f"{head}.{call}", *self.notes]
        if low:
            lines.append(LOW_CONFIDENCE)
        lines.extend(f"Server {slug}: {note}" for slug, note in self.server_descriptions.items())
        for rank, match in enumerate(self.matches, start=1):
            title = "" if match["title"] == match["tool_id"].split("::", 1)[-1] else f"{match['title']}: "
            approval = ", needs approval" if match.get("needs_approval") else ""
            deprecated = ", deprecated" if match.get("deprecated") else ""
            lines.append(
                f"{rank}. {match['tool_id']} - {title}{match['summary']} "
                f"[risk {match['risk']}, {match['operation_class']}{approval}{deprecated}]"
            )
            if match.get("why_matched"):
                lines.append("   why: " + "; ".join(match["why_matched"][:3]))
            if "input_schema" in match:
                lines.append("   inputSchema: " + compact_json(match["input_schema"]))
            else:
                lines.append("   inputs: " + _inputs_text(match["key_inputs"]))
        return "\n".join(lines)


def _inputs_text(inputs: list[dict[str, Any]]) -> str:
    """Key inputs as one short line: "repo_path (string, required), max_count (integer)"."""
    shown = [f"{item['name']} ({item['type']}{', required' if item['required'] else ''})" for item in inputs]
    return ", ".join(shown) or "none"


# Most request words one explanation names. The fields they were found in (name, purpose, parameters ...) are left
# out: a model sees the tool's name, summary and schema beside it, and the field lists were most of an answer's
# "why:" tokens (bench/NOTES-agentux15.md: 20 demo searches, 1,461 -> 731 tokens of "why:" lines).
WHY_WORDS = 6


def _matched_words(fields: dict[str, list[str]], *, quoted: str = "") -> list[str]:
    """The request's words a tool contains, each said once, in the ranking's order, without function words ("de",
    "las", "all": matched, but no reason a reader can use) or words of the example request ``quoted`` beside them."""
    said = set(tokenize(quoted)) if quoted else set()
    words: list[str] = []
    for found in fields.values():
        words += [word for word in found if word not in words and word not in said and not function_word(word)]
    return words[:WHY_WORDS]


def _why_lines(why: dict[str, Any]) -> list[str]:
    """The search engine's explanation as short lines a model can read: the request's words the tool contains and
    the curated example request it is closest to. That it is close in meaning is said only when nothing else is:
    every match is, and the model reads the summary itself."""
    if why.get("shared_words"):  # the no-index listing
        return [f"shares the words: {', '.join(why['shared_words'][:6])}"]
    closest, example = why.get("closest"), why.get("example_request")
    if closest == "learned":
        # Never said: "matches requests that led to this tool" told anyone that someone else's request close to
        # theirs was followed by a call of it (a guess at their words confirmed). The tool's own closest text is
        # named instead, as if it had learned nothing (the curator preview says "learned").
        own = why.get("own") or {}
        closest, example = own.get("closest"), own.get("example_request")
    example = example[:160] if closest == "example" and example else ""
    lines = []
    matched = _matched_words(why.get("fields") or {}, quoted=example)
    if matched:
        lines.append("words: " + ", ".join(matched))
    if example:
        lines.append(f"like the example request {example!r}")
    if why.get("demoted"):
        lines.append(str(why["demoted"]))
    return lines or ["close in meaning"]


# What ``tool_descriptor`` reads of a tool for a search answer (not ``full``), in the order ``_DescriptorRead`` reads
# them: a descriptor not kept yet reads only these, as plain values (no model instances).
DESCRIPTOR_FIELDS = (
    "pk",
    "tool_id",
    "name",
    "title",
    "upstream_title",
    "purpose",
    "description",
    "upstream_deprecated",
    "input_schema",
    "server__slug",
    "server__description",
    "policy__operation_class",
    "policy__risk_class__name",
    "policy__risk_class__requires_approval",
    "policy__risk_class__requires_approval_for_mutating",
)


class _DescriptorRead:
    """The columns of ``DESCRIPTOR_FIELDS`` of the tools of some ids, in one statement: Django's own SQL for
    ``Tool.objects.filter(pk__in=ids).values_list(*DESCRIPTOR_FIELDS)`` (its joins: the server, and the policy and
    its risk class outer-joined, as a tool may have no policy), compiled once per database and number of ids, then
    executed with new ids. Compiling that joined query and building four model instances a row were two thirds of
    a miss's CPU (issue 9, bench/NOTES-perf10.md: ~1.3 ms on SQLite, ~1.6 on Postgres for 5 tools); the rows are
    turned into values as Django's own converters do (the JSON schema decoded by its field, the flags as bools)."""

    CHUNK = 100  # ids per statement: a longer list is read in statements of this many ids, and the rest

    def __init__(self) -> None:
        self._statements: dict[tuple[str, str, int], str] = {}

    def statement(self, alias: str, count: int) -> str:
        key = (alias, connections[alias].vendor, count)
        sql = self._statements.get(key)
        if sql is None:
            placeholders = list(range(1, count + 1))  # distinct: Django drops repeated ids from an IN list
            query = Tool.objects.filter(pk__in=placeholders).order_by().values_list(*DESCRIPTOR_FIELDS).query
            sql, params = query.get_compiler(using=alias).as_sql()
            if list(params) != placeholders:  # the ids must be the statement's only parameters, in order
                raise RuntimeError(f"the descriptor read's parameters are not its ids: {params!r}")
            self._statements[key] = sql
        return sql

    def rows(self, pks: list[int]) -> list[dict[str, Any]]:
        alias = router.db_for_read(Tool)
        connection = connections[alias]
        schema_field = Tool._meta.get_field("input_schema")
        found = []
        with connection.cursor() as cursor:
            for start in range(0, len(pks), self.CHUNK):
                chunk = pks[start : start + self.CHUNK]
                cursor.execute(self.statement(alias, len(chunk)), chunk)
                for row in cursor.fetchall():
                    values = dict(zip(DESCRIPTOR_FIELDS, row, strict=True))
                    values["input_schema"] = schema_field.from_db_value(values["input_schema"], None, connection)
                    found.append(values)
        return found


def _search_descriptor(values: dict[str, Any]) -> dict[str, Any]:
    """``tool_descriptor`` of the tool whose columns (``_DescriptorRead``) are ``values``."""
    operation_class = values["policy__operation_class"]
    policy = None
    if operation_class is not None:  # a policy row was joined (its operation class is never null)
        mutating = operation_class != OperationClass.READ
        needs_approval = bool(values["policy__risk_class__requires_approval"]) or (
            mutating and bool(values["policy__risk_class__requires_approval_for_mutating"])
        )
        policy = (values["policy__risk_class__name"], operation_class, needs_approval)
    title, description = values["title"], values["description"]
    return _descriptor(
        tool_id=values["tool_id"],
        server=values["server__slug"],
        name=values["name"],
        title=title,
        upstream_title=values["upstream_title"],
        purpose=values["purpose"],
        description=description,
        deprecated=tool_deprecated(
            flagged=bool(values["upstream_deprecated"]),
            name=values["name"],
            title=title or values["upstream_title"],
            description=description,
        ),
        input_schema=values["input_schema"],
        policy=policy,
    )


_descriptor_read = _DescriptorRead()


class SearchDescriptors:
    """How matched tools are shown in search answers, kept per process while the visibility version stands
    (issue 9: looking the tools up was ~11% of a search's CPU). Every write that changes what a descriptor
    shows (tools, servers, policies, risk classes, catalog syncs and curation) rewrites that version in its
    transaction, so a kept descriptor is never served past a change committed before the search began."""

    MAX_ENTRIES = 20_000  # past this the whole set is dropped and refilled by the searches that follow

    def __init__(self) -> None:
        self._version: str | None = None
        self._entries: dict[int, dict[str, Any]] = {}
        self._server_notes: dict[str, str] = {}  # server slug -> its note (``server_note``), from the same reads
        self._lock = threading.Lock()

    def get(self, pks: list[int]) -> dict[int, dict[str, Any]]:
        """The descriptors (without ``why_matched``) of the tools of ``pks`` that exist."""
        version = visibility_row_token()  # read before the tools: a later change rewrites it
        with self._lock:
            if version != self._version:
                self._version, self._entries, self._server_notes = version, {}, {}
            found = {pk: self._entries[pk] for pk in pks if pk in self._entries}
        missing = [pk for pk in pks if pk not in found]
        if not missing:
            return found
        rows = _descriptor_read.rows(list(dict.fromkeys(missing)))
        built = {values["pk"]: _search_descriptor(values) for values in rows}
        notes = {values["server__slug"]: server_note(values["server__description"]) for values in rows}
        with self._lock:
            if version == self._version:  # not when the version moved on while these were read
                if len(self._entries) + len(built) > self.MAX_ENTRIES:
                    self._entries = {}
                self._entries.update(built)
                self._server_notes.update(notes)
        return found | built

    def server_notes(self, slugs: list[str]) -> dict[str, str]:
        """The notes (``server_note``) of the servers of ``slugs`` whose tools ``get`` just read or kept, those
        with one: read by the same query as their tools' descriptors, never by one of their own."""
        with self._lock:
            notes = {slug: self._server_notes.get(slug, "") for slug in dict.fromkeys(slugs)}
        return {slug: note for slug, note in notes.items() if note}

    def clear(self) -> None:
        with self._lock:
            self._version, self._entries, self._server_notes = None, {}, {}


search_descriptors = SearchDescriptors()


def _with_why(descriptor: dict[str, Any], why_matched: list[str], *, schema: bool = True) -> dict[str, Any]:
    """A kept descriptor as ``tool_descriptor(tool, why_matched=...)`` shows it: the same keys in the same
    order, in a new dict (the kept one is shared by every search). ``schema=False``: without its inputSchema."""
    shown = {key: value for key, value in descriptor.items() if key != "input_schema"}
    shown["why_matched"] = [text_for_model(reason) for reason in why_matched]
    if schema:
        shown["input_schema"] = descriptor["input_schema"]
    return shown


def _answer(result: SearchResult) -> SearchAnswer:
    """The matches as a model is shown them. A low-confidence answer (none clearly fits) carries no inputSchema,
    only each tool's key inputs: the model first decides whether one fits at all, and gets the schema of the one
    it picks from tool_inspect (five full schemas cost most of such an answer's tokens, mostly for nothing)."""
    descriptors = search_descriptors.get([m.tool_pk for m in result.matches])
    schema = result.confidence != Confidence.LOW
    kept = [m for m in result.matches if m.tool_pk in descriptors]
    # Past the first few (a model that asked for many is browsing), and a match below the dynamic cut's floor
    # that an answer keeps only as one of its first few (git_status for "what time is it in Tokyo", far below
    # the time tools): key inputs only, as a low-confidence answer.
    matches = [
        _with_why(
            descriptors[m.tool_pk],
            _why_lines(m.why_matched),
            schema=schema and rank < SCHEMAS_SHOWN and m.on_merit,
        )
        for rank, m in enumerate(kept)
    ]
    answer = SearchAnswer(
        matches=matches, degraded=result.degraded or not result.index_ready, confidence=result.confidence.value
    )
    if schema and any("input_schema" not in match for match in matches):
        answer.notes.append(SCHEMAS_CUT)
    answer.server_descriptions = search_descriptors.server_notes(
        [match["server"] for match in matches if "input_schema" in match]
    )
    return answer


@visibility_row_read_once()  # one read of the version row for the whole search (governance.cache)
def gateway_search(
    *,
    principal: Principal,
    query: str,
    top_k: int = TOP_K_DEFAULT,
    operation_class: str | None = None,
    environment: str | None = None,
    scope: str = "all",
    client: str | None = "mcp",
) -> SearchAnswer:
    """The tool_search answer for ``principal`` (search's result formatted for a model).

    ``client`` names the entry point a client searched through (``mcp`` for tool_search, ``api`` for the
    REST search): the search is then recorded in the query log, the metrics and a discovery audit event.
    ``client=None`` records nothing (reports such as ``scout_context``). Raises GatewayInputError for an
    unusable query or bad filters."""
    started = time.monotonic()
    with tracer.start_as_current_span("scout.tool_search", attributes={"scout.top_k": top_k}) as span:
        try:
            result = search_for_principal(
                principal=principal,
                query=query,
                top_k=top_k,
                operation_class=operation_class,
                environment=environment,
                scope=scope,
            )
        except SearchQueryError as exc:
            raise GatewayInputError(str(exc), exc.field) from None
        answer = _answer(result)
        if top_k > TOP_K_MAX or top_k < TOP_K_MIN:  # an integer: search refused anything else
            # first: about the request itself, before the note on the matches' schemas
            answer.notes.insert(0, TOP_K_CAPPED if top_k > TOP_K_MAX else TOP_K_RAISED)
        narrowed = {"operation_class": operation_class, "environment": environment, "scope": scope != "all"}
        answer.filters = [name for name, value in narrowed.items() if value]
        unsearched = None if answer.confidence == Confidence.HIGH else not_serving_note(principal=principal)
        if unsearched is not None:
            answer.notes.append(unsearched)
        if not answer.matches and not answer.filters and unsearched is None:  # a token for a user without grants
            answer.nothing_granted = result.nothing_visible  # unfiltered: the caller's whole visible set
        span.set_attribute("scout.confidence", answer.confidence)
        span.set_attribute("scout.matches", len(answer.matches))
    if client is None:
        return answer
    # Both records are queued and inserted in batches (governance/writebehind.py): a search's answer never
    # waits for the database's write lock.
    latency_ms = (time.monotonic() - started) * 1000
    search_observe(
        principal=principal,
        query=query,
        result=result,
        latency_ms=latency_ms,
        client=client,
        deferred=True,
        empty_reason=answer.empty_reason(),
    )
    for acting, returned in _filed_as(principal, [match["tool_id"] for match in answer.matches]):
        audit_record(
            event_type=AuditEventType.DISCOVERY,
            principal=acting,
            outcome=AuditOutcome.SUCCESS,
            payload={
                "meta_tool": "tool_search",
                "query_chars": len(query),
                "top_k": top_k,
                "scope": scope,
                "returned": returned,
                "degraded": answer.degraded,
                "abstained": answer.abstained,
                "confidence": answer.confidence,
            },
            deferred=True,
        )
    return answer


NOT_SERVING_NOTED = 5  # servers named at most: the note sits in a context window


def not_serving_note(*, principal: Principal) -> str | None:
    """For an answer that found no clear fit: the servers holding tools ``principal`` could use were they serving
    (``servers_not_serving_for``), which no search sees, with why and whether they come back; None when there are none.
    Without it the model read a low answer (or "nothing is granted to you") for a step whose tool is only down."""
    servers = servers_not_serving_for(principal=principal, limit=NOT_SERVING_NOTED + 1)
    if not servers:
        return None
    said = []
    for slug, status in servers[:NOT_SERVING_NOTED]:
        why, comes_back = SERVER_NOT_SERVING_WHY.get(status, ("an operator stopped it", False))
        then = "back once it syncs: try again in a few minutes" if comes_back else "it will not come back by itself"
        said.append(f"{slug} ({status}: {why}; {then})")
    more = ", and more" if len(servers) > NOT_SERVING_NOTED else ""
    return f"Not searched: your tools on servers not serving now: {', '.join(said)}{more}."


def _filed_as(principal: Principal, tool_ids: list[str]) -> list[tuple[Principal, list[str]]]:
    """Under whom a search's discovery event is filed, with the tools it names: the principal and every tool,
    unless it acts across tenants (a session of a person in several), whose event filed as shared would show
    every tenant the other tenants' tools (Z12). Then one event per tenant whose tools it returned, as acting in
    that tenant, naming that tenant's tools and the shared ones (one shared event if it returned no tenant's)."""
    if not principal.acts_across_tenants:
        return [(principal, tool_ids)]
    owners = {
        tool_id: (tenant_id, slug)
        for tool_id, tenant_id, slug in Tool.objects.filter(tool_id__in=tool_ids).values_list(
            "tool_id", "server__tenancy__tenant_id", "server__tenancy__tenant__slug"
        )
    }
    tenants = sorted({owner for owner in owners.values() if owner[0] is not None})
    if not tenants:
        return [(principal, tool_ids)]
    return [
        (
            replace(principal, tenant_id=tenant_id, tenant=slug),
            [tool_id for tool_id in tool_ids if owners.get(tool_id, (None, ""))[0] in (None, tenant_id)],
        )
        for tenant_id, slug in tenants
    ]


# --- tool_inspect -------------------------------------------------------------------------------


def gateway_inspect(*, principal: Principal, tool_ids: list[str]) -> list[dict[str, Any]]:
    """Full definitions of visible tools. Raises UnknownTool if any id is unknown or hidden (naming, when
    several ids were asked, every such id: hidden ones exactly as unknown ones, with the definitions of the others
    in ``found``), GatewayInputError for an empty or too long list."""
    if not isinstance(tool_ids, list) or not tool_ids:
        raise GatewayInputError("tool_ids is empty: pass tool ids returned by tool_search")
    if len(tool_ids) > MAX_INSPECT_IDS:
        raise GatewayInputError(f"pass at most {MAX_INSPECT_IDS} tool ids")
    tools, unknown, not_serving = [], [], []
    several = len(tool_ids) > 1
    for tool_id in dict.fromkeys(tool_ids):
        try:
            tools.append(tool_get_for_principal(principal=principal, tool_id=tool_id, permission="discover"))
        except ToolNotFound:
            position = tool_ids.index(tool_id)
            unavailable = tool_not_serving(
                principal=principal, tool_id=tool_id, permission="discover", position=position if several else None
            )
            if unavailable is not None:
                not_serving.append(unavailable)
            else:
                unknown.append((position, tool_id))
    closest: dict[str, list[str]] = {}
    if unknown or not_serving:
        _audit_unknown(principal, "tool_inspect", "unknown_tool" if unknown else "server_not_serving")
        typed = [tool_id for _, tool_id in unknown]
        closest = tool_ids_close_to(principal=principal, typed=typed, permission="discover") if typed else {}
        if not tools:
            raise UnknownTool(unknown if several else None, closest=closest, not_serving=not_serving)
    audit_record(
        event_type=AuditEventType.DISCOVERY,
        principal=principal,
        outcome=AuditOutcome.SUCCESS,
        payload={"meta_tool": "tool_inspect", "returned": [tool.tool_id for tool in tools]},
        deferred=True,
    )
    found = [tool_descriptor(tool, full=True) for tool in tools]
    if unknown or not_serving:  # one mistyped id among several: the others' definitions still come back, saving a turn
        raise UnknownTool(unknown, found=found, closest=closest, not_serving=not_serving)
    return found


def _audit_unknown(principal: Principal, meta_tool: str, reason: str = "unknown_tool") -> None:
    # The asked-for id is not recorded: it may be hostile text, and the event must look the same either way.
    audit_record(
        event_type=AuditEventType.DISCOVERY if meta_tool == "tool_inspect" else AuditEventType.EXECUTION,
        principal=principal,
        outcome=AuditOutcome.DENIED,
        payload={"meta_tool": meta_tool, "reason": reason},
    )
