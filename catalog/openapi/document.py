"""OpenAPI 3.0/3.1 documents: load (stored or fetched under the egress rules), validate, turn operations into tools.

Each operation becomes a raw MCP tool dict for ``catalog.definitions.normalize_listing``, so OpenAPI tools are
validated, hashed, revised and reviewed exactly like MCP tools. How to call the operation (method, path
template, where each argument goes) travels inside the input schema under ``x-scout-openapi``: it is part of
the hashed definition, so a document that quietly re-routes an operation (another path, a parameter moved
from the query to a header) is a changed definition held for review, like any rug pull.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import anyio
import httpx
import yaml
from django.conf import settings
from jsonschema.exceptions import ValidationError as JSONSchemaValidationError
from openapi_spec_validator import validate as validate_spec
from openapi_spec_validator.validation.exceptions import OpenAPISpecValidatorError

from catalog.definitions import name_spelling_problem
from catalog.egress import EgressRefused, egress_check, same_origin
from catalog.secrets import json_secrets_removed, secrets_removed, server_secrets
from catalog.upstream import UpstreamError, listing_cap_check, run_async, safe_url

from .body import ACCEPTED_ENCODINGS, body_read
from .credentials import cookie_header, credentials_for
from .schemas import SchemaResolveError, SchemaResolver, merge_all_of

if TYPE_CHECKING:
    from catalog.models import Server

logger = logging.getLogger(__name__)

BINDING_KEY = "x-scout-openapi"
HTTP_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")
PARAMETER_PLACES = ("path", "query", "header", "cookie")
# Per OpenAPI, these header parameters are ignored: the request's own machinery sets them (Scout also sets Host,
# Cookie, Accept-Encoding, whose answer it decompresses under its bound, and the framing headers; a caller's value
# beside them would be a second Host, Cookie or Accept-Encoding header).
IGNORED_HEADERS = frozenset(
    {"accept", "content-type", "authorization", "host", "cookie", "content-length", "transfer-encoding", "connection"}
    | {"accept-encoding", "te"}
)
TOOL_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,128}$")
# A header or cookie name as HTTP writes one (RFC 9110 "token"): any other character (a space, a colon, "München")
# the HTTP client refuses or cannot encode, and every call of the operation failed on it.
HTTP_TOKEN_RE = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
BODY_PROPERTY = "body"


class OperationRefused(ValueError):
    """An operation Scout cannot call; the message says why (a per-tool rejection of the sync run)."""


def climbs(path: str) -> bool:
    """Whether ``path`` (an operation's path, or a path argument) has a ``.`` or ``..`` segment, also
    percent-encoded (once or twice) or behind a backslash. A client, server or proxy that normalizes it leaves the
    base URL's path (``/v1`` + ``/../admin`` is ``/admin``) and the service's credentials go along."""
    for _ in range(3):
        decoded = unquote(path)
        if decoded == path:
            break
        path = decoded
    return any(segment in (".", "..") for segment in re.split(r"[/\\]", path))


@dataclass
class OperationListing:
    """What a document offers: raw tool dicts, the refused operations, and every name seen."""

    tools: list[dict[str, Any]] = field(default_factory=list)
    rejections: list[dict[str, str]] = field(default_factory=list)
    names: set[str] = field(default_factory=set)


def _fail(server: Server, message: str, kind: str = "config") -> UpstreamError:
    # Never a credential's value, should the service have quoted it (``catalog.secrets``).
    return UpstreamError(f"{server.slug}: {secrets_removed(message, server_secrets(server))}", kind=kind)


# --- loading ------------------------------------------------------------------------------------------


def openapi_document_parse(text: str | bytes) -> dict[str, Any]:
    """JSON or YAML text to a mapping. Raises ValueError with a readable message."""
    if isinstance(text, bytes):
        text = text.decode("utf-8-sig", errors="strict")
    try:
        try:
            document = json.loads(text)
        except ValueError:
            try:
                document = yaml.safe_load(text)
            except yaml.YAMLError as exc:
                raise ValueError(f"the document is neither JSON nor YAML ({str(exc).splitlines()[0]})") from exc
    except RecursionError:
        # Both parsers recurse per level: thousands of nested brackets are a hostile document, not a 500.
        raise ValueError("the document is nested too deeply") from None
    if not isinstance(document, dict):
        raise ValueError("the document is not a JSON/YAML object")
    _refuse_shared_nodes(document)
    return document


def _refuse_shared_nodes(document: dict[str, Any]) -> None:
    """A YAML alias of a mapping or list makes the same object appear twice: a list may then hold itself (every
    walk of the document never ends) and a few hundred bytes of nested aliases stand for 10^9 items. Every
    object must appear once, as in JSON (``$ref`` is how OpenAPI repeats things). Raises ValueError."""
    seen: set[int] = set()
    stack: list[Any] = [document]
    while stack:
        node = stack.pop()
        if id(node) in seen:
            raise ValueError("YAML aliases (*name) of mappings or lists are not supported; use $ref")
        seen.add(id(node))
        children = node.values() if isinstance(node, dict) else node
        stack.extend(child for child in children if isinstance(child, dict | list))


def _fetch(server: Server, timeout: float) -> bytes:
    url = server.openapi_url
    max_bytes = settings.SCOUT_OPENAPI_MAX_DOCUMENT_BYTES
    try:
        target = egress_check(url)
    except EgressRefused as exc:
        raise _fail(server, f"document URL refused: {exc}") from exc
    extensions = {"sni_hostname": target.host} if url.startswith("https:") else {}
    headers = {
        "Host": target.host_header,
        "Accept": "application/json, application/yaml",
        "Accept-Encoding": ACCEPTED_ENCODINGS,
    }
    params: list[tuple[str, str]] = []
    if same_origin(url, server.base_url):
        # The service's own credentials go only to the service's own origin, never to a third-party host.
        credentials = credentials_for(server)
        headers.update(credentials.headers)
        params = credentials.query
        if credentials.cookies:
            headers["Cookie"] = cookie_header(credentials.cookies)

    async def fetch() -> bytes:
        # The timeout is the whole fetch's, headers included: httpx's bounds each read, and a service sending a
        # piece (of its headers or of the document) before each one ran out held the fetch as long as it liked.
        with anyio.fail_after(timeout):
            async with httpx.AsyncClient(follow_redirects=False, timeout=timeout, trust_env=False) as client:
                async with client.stream(
                    "GET", target.pinned_url, params=params, headers=headers, extensions=extensions
                ) as response:
                    if response.is_redirect:
                        location = safe_url(response.headers.get("location", ""))
                        raise _fail(
                            server, f"the document URL redirects to {location}; redirects are not followed", "protocol"
                        )
                    if response.status_code != 200:
                        raise _fail(server, f"HTTP {response.status_code} fetching {safe_url(url)}", "protocol")
                    body, over = await body_read(response, max_bytes)  # bounded as it decompresses
                    if over:
                        raise _fail(server, f"the document is larger than {max_bytes} bytes", "protocol")
                    return body

    try:
        return run_async(fetch)
    except (httpx.TimeoutException, TimeoutError) as exc:
        raise _fail(server, f"timed out fetching the document {safe_url(url)}", "timeout") from exc
    except httpx.HTTPError as exc:
        raise _fail(server, f"could not fetch {safe_url(url)}: {type(exc).__name__}", "refused") from exc


def openapi_document_load(server: Server, *, text: str | None = None) -> dict[str, Any]:
    """The server's document (``text`` when given, as an unsaved form's; else the stored one, or fetched from its
    URL), parsed and validated. Raises UpstreamError."""
    from catalog.services.openapi_documents import server_openapi_document_get  # noqa: PLC0415 - ORM after setup

    stored = server_openapi_document_get(server=server) if text is None else text
    if stored.strip():
        raw: str | bytes = stored
        if len(stored.encode("utf-8")) > settings.SCOUT_OPENAPI_MAX_DOCUMENT_BYTES:
            raise _fail(server, f"the document is larger than {settings.SCOUT_OPENAPI_MAX_DOCUMENT_BYTES} bytes")
    elif server.openapi_url:
        raw = _fetch(server, settings.SCOUT_UPSTREAM_LIST_TIMEOUT)
    else:
        raise _fail(server, "no OpenAPI document or document URL configured")
    try:
        document = openapi_document_parse(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise _fail(server, f"malformed OpenAPI document: {exc}", "protocol") from exc
    try:
        openapi_document_validate(document)
    except ValueError as exc:
        raise _fail(server, f"malformed OpenAPI document: {exc}", "protocol") from exc
    # The document is fetched with the service's credentials and may quote them (a "try it" example filled in with
    # the caller's key): its text becomes tools stored, indexed and served to callers, and refusals shown with the
    # run. Never with a value Scout gave the service (``catalog.secrets``); a validated document shares no node.
    return json_secrets_removed(document, server_secrets(server))


def _remote_ref(node: Any, path: str = "#") -> str | None:
    stack: list[tuple[Any, str]] = [(node, path)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if isinstance(ref, str) and not ref.startswith("#"):
                return f"{ref!r} at {where}"
            stack.extend((value, f"{where}/{key}") for key, value in item.items())
        elif isinstance(item, list):
            stack.extend((value, f"{where}/{index}") for index, value in enumerate(item))
    return None


def openapi_document_validate(document: dict[str, Any]) -> None:
    """Accept OpenAPI 3.0 and 3.1 documents that pass openapi-spec-validator. Raises ValueError."""
    version = str(document.get("openapi", ""))
    if "swagger" in document:
        raise ValueError("Swagger / OpenAPI 2.0 is not supported; give an OpenAPI 3.0 or 3.1 document")
    if not re.match(r"^3\.[01]\.\d+$", version):
        raise ValueError(f"'openapi' is {version[:40]!r}; only OpenAPI 3.0.x and 3.1.x are supported")
    remote = _remote_ref(document)
    if remote:
        # Checked before validation: the validator would otherwise fetch the reference from the network.
        raise ValueError(f"remote $ref {remote} is not supported; bundle the document into one file")
    try:
        validate_spec(document)
    except (OpenAPISpecValidatorError, JSONSchemaValidationError) as exc:
        where = "/".join(str(part) for part in getattr(exc, "absolute_path", None) or getattr(exc, "path", []) or [])
        message = (getattr(exc, "message", "") or str(exc)).splitlines()[0][:500]
        raise ValueError(message + (f" (at {where})" if where else "")) from exc
    except Exception as exc:  # the validator tripping over a document is a malformed document too
        raise ValueError(f"the validator could not read it: {type(exc).__name__}: {str(exc)[:300]}") from exc


# --- operations -> tools ------------------------------------------------------------------------------


def fallback_name(method: str, path: str) -> str:
    """A stable, readable name for an operation without operationId: ``get /pets/{petId}`` -> ``get_pets_petId``."""
    words = re.sub(r"[^A-Za-z0-9]+", "_", path).strip("_")
    return f"{method.lower()}_{words}"[:128] if words else method.lower()


def tool_name(operation: dict[str, Any], method: str, path: str) -> str:
    operation_id = operation.get("operationId")
    if isinstance(operation_id, str) and operation_id.strip():
        if TOOL_NAME_RE.match(operation_id):
            return operation_id
        cleaned = re.sub(r"[^A-Za-z0-9_.-]+", "_", operation_id).strip("_")[:128]
        if cleaned:
            return cleaned
    return fallback_name(method, path)


def operation_id_problem(operation: dict[str, Any]) -> str | None:
    """Why an operation's ``operationId`` could pass for another tool's name (as sync says it of an MCP tool's name,
    ``name_spelling_problem``), or None: one that reads as another is refused, not cleaned into a name of its own
    ("сору", Cyrillic, became ``post_copy`` and the run said nothing; redteam44)."""
    operation_id = operation.get("operationId")
    if not isinstance(operation_id, str):
        return None
    problem = name_spelling_problem(operation_id)
    return f"tool name {ascii(operation_id[:80])} {problem}" if problem else None


def method_annotations(method: str) -> dict[str, Any]:
    """MCP hints from HTTP semantics (RFC 9110); untrusted like any upstream hint, an admin's class wins."""
    safe = method in ("get", "head", "options", "trace")
    return {
        "readOnlyHint": safe,
        "destructiveHint": method in ("delete", "put", "patch"),
        "idempotentHint": safe or method in ("put", "delete"),
        "openWorldHint": True,
    }


def _merged_parameters(resolver: SchemaResolver, path_item: dict, operation: dict) -> list[dict[str, Any]]:
    """Path-level parameters overridden by operation-level ones with the same name and place."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for raw in [*(path_item.get("parameters") or []), *(operation.get("parameters") or [])]:
        parameter = resolver.deref(raw)
        merged[(parameter["name"], parameter["in"])] = parameter
    return list(merged.values())


def _parameter_schema(resolver: SchemaResolver, parameter: dict[str, Any]) -> dict[str, Any]:
    name, place = parameter["name"], parameter["in"]
    if "schema" not in parameter:
        raise OperationRefused(f"parameter {name!r} ({place}) uses 'content' instead of 'schema'; not supported")
    schema = merge_all_of(resolver.schema(parameter["schema"]))
    if not isinstance(schema, dict):
        schema = {}
    kind = schema.get("type")
    if kind == "object" or (isinstance(kind, list) and "object" in kind) or (kind is None and "properties" in schema):
        raise OperationRefused(f"parameter {name!r} ({place}) is an object; only scalar and array parameters")
    schema = dict(schema)
    if parameter.get("description") and "description" not in schema:
        schema["description"] = parameter["description"]
    if parameter.get("deprecated"):
        schema["deprecated"] = True
    return schema


def _json_media(content: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
    for media_type, media in content.items():
        base = media_type.split(";", 1)[0].strip().lower()
        if base == "application/json" or base.endswith("+json"):
            return media_type, media or {}
    return None


def operation_tool(resolver: SchemaResolver, method: str, path: str, path_item: dict, operation: dict) -> dict:
    """One operation as a raw MCP tool dict. Raises OperationRefused for what Scout cannot call."""
    if operation.get("callbacks"):
        raise OperationRefused("callbacks are not supported")
    if climbs(path):
        raise OperationRefused("the path has a '.' or '..' segment: it would leave the base URL's path")
    properties: dict[str, Any] = {}
    required: list[str] = []
    places: list[dict[str, Any]] = []
    for parameter in _merged_parameters(resolver, path_item, operation):
        name, place = parameter["name"], parameter["in"]
        if place == "header" and name.lower() in IGNORED_HEADERS:
            continue
        if place not in PARAMETER_PLACES:
            raise OperationRefused(f"parameter {name!r} has unknown location {place!r}")
        if place in ("header", "cookie") and not HTTP_TOKEN_RE.fullmatch(name):
            raise OperationRefused(f"parameter {name!r} ({place}) is not a name a {place} can carry")
        if name in properties:
            raise OperationRefused(f"parameter name {name!r} is used in two places; not supported")
        style = parameter.get("style") or ("form" if place in ("query", "cookie") else "simple")
        if style not in ("form", "simple"):
            raise OperationRefused(f"parameter {name!r} ({place}) has style {style!r}; only form and simple")
        properties[name] = _parameter_schema(resolver, parameter)
        if parameter.get("required") or place == "path":
            required.append(name)
        explode = parameter.get("explode", style == "form")
        places.append({"name": name, "in": place, "explode": bool(explode)})

    binding: dict[str, Any] = {"method": method.upper(), "path": path, "parameters": places, "body": None}
    additional: Any = False
    body = resolver.deref(operation.get("requestBody")) if operation.get("requestBody") else None
    if body:
        media = _json_media(body.get("content") or {})
        if media is None:
            # Even an optional one: a tool that can never send the body it exists for would mislead.
            kinds = ", ".join(sorted(body.get("content") or {})) or "no media type"
            raise OperationRefused(f"request body is {kinds}; only JSON request bodies are supported")
        else:
            media_type, media_object = media
            schema = merge_all_of(resolver.schema(media_object.get("schema") or {}))
            schema = schema if isinstance(schema, dict) else {}
            body_properties = schema.get("properties") if schema.get("type", "object") == "object" else None
            mergeable = isinstance(body_properties, dict) and not set(body_properties) & set(properties)
            if mergeable and body_properties is not None:
                # Body fields sit beside the parameters: every argument that is not a parameter goes in the body.
                properties.update(body_properties)
                if body.get("required"):
                    required.extend(n for n in schema.get("required") or [] if n not in required)
                additional = schema.get("additionalProperties", True)
                binding["body"] = {"mode": "merged", "contentType": media_type, "required": bool(body.get("required"))}
            else:
                name = BODY_PROPERTY if BODY_PROPERTY not in properties else "requestBody"
                properties[name] = schema
                if body.get("required"):
                    required.append(name)
                binding["body"] = {"mode": "property", "property": name, "contentType": media_type}
    input_schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        input_schema["required"] = required
    if additional is not True:
        input_schema["additionalProperties"] = additional
    input_schema[BINDING_KEY] = binding
    summary = operation.get("summary") if isinstance(operation.get("summary"), str) else ""
    description = operation.get("description") if isinstance(operation.get("description"), str) else ""
    description = (description or summary).strip() or f"{method.upper()} {path}"
    return {
        "name": tool_name(operation, method, path),
        "title": summary.strip()[:500],
        "description": description,
        "inputSchema": input_schema,
        "annotations": method_annotations(method),
        # The flag, not words in the upstream's text: ``ToolDefinition.deprecated``, outside the definition's hash.
        "deprecated": operation.get("deprecated") is True,
    }


def openapi_operations(document: dict[str, Any]) -> OperationListing:
    """Every operation of a validated document as a raw tool dict, or a rejection with its reason."""
    resolver = SchemaResolver(document, openapi_30=str(document.get("openapi", "")).startswith("3.0"))
    listing = OperationListing()
    for path, path_item in (document.get("paths") or {}).items():
        if not path.startswith("/"):
            continue  # an extension (``x-...``), not a path: appended to the base URL it could name another host
        try:
            path_item = resolver.deref(path_item)
        except SchemaResolveError as exc:
            listing.rejections.append({"name": path[:120], "reason": str(exc)})
            continue
        for method in HTTP_METHODS:
            operation = path_item.get(method)
            if not isinstance(operation, dict):
                continue
            name = tool_name(operation, method, path)
            listing.names.add(name)
            problem = operation_id_problem(operation)
            if problem:
                listing.rejections.append({"name": name[:120], "reason": f"{method.upper()} {path}: {problem}"})
                continue
            try:
                listing.tools.append(operation_tool(resolver, method, path, path_item, operation))
            except (OperationRefused, SchemaResolveError, KeyError, TypeError) as exc:
                reason = str(exc) if not isinstance(exc, KeyError | TypeError) else f"malformed operation ({exc})"
                listing.rejections.append({"name": name[:120], "reason": f"{method.upper()} {path}: {reason}"})
    return listing


def openapi_list_tools(server: Server, *, text: str | None = None) -> OperationListing:
    """Load and validate the server's document (``text``: see ``openapi_document_load``), then list its operations.
    Raises UpstreamError, also for a document of more operations than SCOUT_UPSTREAM_MAX_TOOLS (as an MCP
    server's listing)."""
    listing = openapi_operations(openapi_document_load(server, text=text))
    listing_cap_check(server, len(listing.tools) + len(listing.rejections), "the OpenAPI document")
    return listing
