"""Call one OpenAPI operation over HTTP with ``httpx`` and return the answer as an MCP ``CallToolResult``.

The arguments were already validated against the tool's input schema by the gateway. The request goes only
to the server's base URL (checked and DNS-pinned by egress.py), never to a host named by the document or a
redirect. Credentials come from the environment variables the server names, at call time; their values are
never logged, stored or echoed (a failure names the variable, not its value).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import anyio
import httpx
import mcp_types as types

from catalog.egress import EgressRefused, EgressTarget, egress_resolved, same_origin
from catalog.secrets import secrets_removed, server_secrets
from catalog.upstream import UpstreamError, safe_url

from .body import ACCEPTED_ENCODINGS, body_read
from .credentials import cookie_header, credentials_for
from .document import BINDING_KEY, HTTP_TOKEN_RE, IGNORED_HEADERS, climbs

if TYPE_CHECKING:
    from collections.abc import Callable

    from catalog.models import Server

logger = logging.getLogger(__name__)

ERROR_EXCERPT_CHARS = 500
# Room left under the output cap for the result's own JSON (content wrapper, status, notice).
ENVELOPE_BYTES = 1024


class _HideQuery(logging.Filter):
    """httpx logs each request URL at INFO; an API key may travel in its query string, so drop the query."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple) and any(isinstance(arg, httpx.URL) for arg in record.args):
            record.args = tuple(safe_url(str(arg)) if isinstance(arg, httpx.URL) else arg for arg in record.args)
        return True


logging.getLogger("httpx").addFilter(_HideQuery())


def _fail(server: Server, message: str, kind: str) -> UpstreamError:
    # Never a credential's value, should the service have quoted it (``catalog.secrets``).
    return UpstreamError(f"{server.slug}: {secrets_removed(message, server_secrets(server))}", kind=kind)


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return ""
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def build_request(server: Server, input_schema: dict[str, Any], arguments: dict[str, Any]) -> dict[str, Any]:
    """The request (method, URL, query, headers, JSON body) for validated ``arguments``. Raises UpstreamError."""
    binding = input_schema.get(BINDING_KEY)
    if not isinstance(binding, dict):
        raise _fail(server, "the tool has no OpenAPI binding; sync the server again", "config")
    path = binding["path"]
    if climbs(path):
        raise _fail(server, "the operation's path does not stay on the base URL; sync the server again", "config")
    query: list[tuple[str, str]] = []
    headers: dict[str, str] = {}
    cookies: dict[str, str] = {}
    used: set[str] = set()
    credentials = credentials_for(server)
    # What Scout sets is never also set by an argument (a binding from an older sync may still name these).
    scouts = {("header", name.lower()) for name in credentials.headers} | {("query", n) for n, _ in credentials.query}
    scouts |= {("header", name) for name in IGNORED_HEADERS}
    for parameter in binding["parameters"]:
        name, place = parameter["name"], parameter["in"]
        used.add(name)
        if name not in arguments or arguments[name] is None:
            continue
        if (place, name.lower() if place == "header" else name) in scouts:
            continue
        if place in ("header", "cookie") and not HTTP_TOKEN_RE.fullmatch(name):  # a binding from an older sync
            raise _fail(server, f"a {place} parameter's name is no {place} name; sync the server again", "config")
        value = arguments[name]
        if place == "query" and isinstance(value, list) and parameter.get("explode", True):
            query.extend((name, _scalar(item)) for item in value)
            continue
        text = ",".join(_scalar(item) for item in value) if isinstance(value, list) else _scalar(value)
        if place == "path":
            if climbs(text):
                # Refused before anything is sent: escaped as %2E%2E it is still ".." to a server that decodes
                # before it normalizes, and the call would reach another endpoint with the service's credentials.
                raise _fail(server, f"path argument {name!r} is or holds a '.' or '..' segment", "config")
            # Percent-escape everything, "/" included: an argument never adds a path segment of its own.
            path = path.replace("{" + name + "}", quote(text, safe=""))
        elif place == "query":
            query.append((name, text))
        elif place == "header":
            if not _header_writable(text):
                # Refused before anything is sent: a line break would smuggle another header in, and a character
                # the HTTP client cannot write failed the call unaudited (redteam46).
                raise _fail(
                    server,
                    f"header argument {name!r} contains a line break or a character headers cannot carry",
                    "config",
                )
            headers[name] = text
        else:
            if ";" in text or not _header_writable(text):
                # A ";" would add another cookie (one named like the service's credential, read first).
                raise _fail(
                    server,
                    f"cookie argument {name!r} contains ';', a line break or a character headers cannot carry",
                    "config",
                )
            cookies[name] = text
    body = binding.get("body")
    content: bytes | None = None
    if body:
        if body["mode"] == "merged":
            payload: Any = {key: value for key, value in arguments.items() if key not in used}
            send = bool(payload) or body.get("required")
        else:
            payload = arguments.get(body["property"])
            send = body["property"] in arguments
        if send:
            content = json.dumps(payload, ensure_ascii=False).encode("utf-8")
            headers["Content-Type"] = body.get("contentType") or "application/json"
    headers.update(credentials.headers)
    query.extend(credentials.query)
    cookies.update(credentials.cookies)
    if cookies:
        headers["Cookie"] = cookie_header(cookies)
    headers.setdefault("Accept", "application/json, */*;q=0.5")
    url = server.base_url.rstrip("/") + path
    if not path.startswith("/") or not same_origin(url, server.base_url):
        # Only ever the base URL's host: a path from the document must not turn it into user info or a port.
        raise _fail(server, "the operation's path does not stay on the base URL; sync the server again", "config")
    return {"method": binding["method"], "url": url, "params": query, "headers": headers, "content": content}


def _header_writable(text: str) -> bool:
    """Whether ``text`` goes into a header as it is: printable ASCII, spaces and tabs. A line break would start
    another header; the HTTP client raises UnicodeEncodeError for any other character (``München``), and h11
    refuses other control characters."""
    return all(ch == "\t" or " " <= ch <= "~" for ch in text)


def _text_result(text: str, *, is_error: bool, structured: dict[str, Any] | None = None) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=text)], structured_content=structured, is_error=is_error
    )


def response_result(status: int, content_type: str, body: bytes, *, truncated: bool, max_bytes: int) -> Any:
    """The tool result for an HTTP answer: 2xx is success, anything else a tool error with an excerpt."""
    text = body.decode("utf-8", errors="replace")
    if not 200 <= status < 300:
        excerpt = text[:ERROR_EXCERPT_CHARS] + ("…" if len(text) > ERROR_EXCERPT_CHARS or truncated else "")
        return _text_result(
            f"HTTP {status} from the service: {excerpt}" if excerpt else f"HTTP {status} from the service",
            is_error=True,
            structured={"status": status},
        )
    if truncated:
        notice = f"\n[truncated: the response exceeded the gateway's limit of {max_bytes} bytes]"
        return _text_result(text + notice, is_error=False, structured={"status": status, "truncated": True})
    structured: dict[str, Any] = {"status": status}
    if "json" in content_type.lower() and text.strip():
        data = _json_read(text)
        # The JSON travels twice (text and structured): keep both only while they fit under the cap.
        if data is not None and 2 * len(body) + ENVELOPE_BYTES <= max_bytes:
            structured["body"] = data
    return _text_result(text, is_error=False, structured=structured)


def _json_read(text: str) -> Any:
    """``text`` read as JSON (None when it is no JSON, or nested deeper than Python's json reads), each lone surrogate
    in it (``"\\ud83d"``: half a character, as JavaScript's ``String.slice`` cuts an emoji and ``JSON.stringify``
    writes it) read as U+FFFD, as the body's invalid bytes are. Either failed the call after the service ran it: no
    UTF-8 can write a lone surrogate, and RecursionError is no ValueError (redteam39, T15)."""
    try:
        data = json.loads(text)
        written = json.dumps(data, ensure_ascii=False)
    except (ValueError, RecursionError):
        return None
    try:
        written.encode("utf-8")
    except UnicodeEncodeError:
        return json.loads(written.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))
    return data


async def openapi_target(server: Server) -> EgressTarget:
    """The checked, resolved address of the service's base URL (``egress_check``), for ``openapi_call``'s ``pinned``.
    Raises UpstreamError "config" when it is refused (nothing sent)."""
    return await _checked(server, server.base_url)


async def _checked(server: Server, url: str) -> EgressTarget:
    try:
        return await egress_resolved(url)
    except EgressRefused as exc:
        raise _fail(server, f"request refused: {exc}", "config") from exc


async def openapi_call(
    server: Server,
    input_schema: dict[str, Any],
    arguments: dict[str, Any],
    *,
    timeout: float,
    max_bytes: int,
    pinned: EgressTarget | None = None,
    sending: Callable[[], None] | None = None,
) -> types.CallToolResult:
    """Send one operation's request and read at most ``max_bytes`` of the answer. ``sending`` is called once the
    request is built, just before it is sent (what failed before it sent nothing).

    ``pinned`` (from ``openapi_target``): the base URL's address checked earlier, used for a request to the same
    origin instead of looking the host up again; without it, or for another origin, the URL is checked now.
    Raises UpstreamError: kind "config" (egress refused, credentials missing, no URL can carry the arguments: nothing
    was sent), "refused"
    (no connection: nothing was sent), "timeout" (may have run upstream), "error" (other HTTP failures).
    """
    request = build_request(server, input_schema, arguments)
    if pinned is not None and same_origin(pinned.url, request["url"]):
        target = dataclasses.replace(pinned, url=request["url"])
    else:
        target = await _checked(server, request["url"])
    request["headers"]["Host"] = target.host_header
    request["headers"]["Accept-Encoding"] = ACCEPTED_ENCODINGS  # what body_read decompresses under its bound
    extensions = {"sni_hostname": target.host} if request["url"].startswith("https:") else {}
    limit = max(0, max_bytes - ENVELOPE_BYTES)
    try:
        async with httpx.AsyncClient(follow_redirects=False, timeout=timeout, trust_env=False) as client:
            with anyio.fail_after(timeout):
                outgoing = client.build_request(
                    request["method"],
                    target.pinned_url,
                    params=request["params"],
                    headers=request["headers"],
                    content=request["content"],
                    extensions=extensions,
                )
                if sending is not None:
                    sending()
                # client.stream(), in two steps: what the request's building raised (InvalidURL, a header httpx cannot
                # encode) is known to have sent nothing.
                async with contextlib.aclosing(await client.send(outgoing, stream=True)) as response:
                    if response.is_redirect:
                        location = safe_url(response.headers.get("location", ""))
                        return _text_result(
                            f"HTTP {response.status_code}: the service redirected to {location}. Scout does not "
                            "follow redirects (they could send the request to another host).",
                            is_error=True,
                            structured={"status": response.status_code},
                        )
                    body, truncated = await body_read(response, limit)  # bounded as it decompresses
                    logger.info(
                        "openapi %s %s %s -> %s",
                        server.slug,
                        request["method"],
                        input_schema[BINDING_KEY]["path"],
                        response.status_code,
                    )
                    content_type = response.headers.get("content-type", "")
                    return response_result(
                        response.status_code, content_type, body, truncated=truncated, max_bytes=max_bytes
                    )
    except (TimeoutError, httpx.TimeoutException) as exc:
        raise _fail(server, f"timed out after {timeout:g}s calling {request['method']}", "timeout") from exc
    except httpx.ConnectError as exc:
        raise _fail(server, f"connection refused or unreachable: {safe_url(server.base_url)}", "refused") from exc
    except httpx.InvalidURL as exc:
        # Raised building the request, before anything is sent, and no httpx.HTTPError: a query or path argument that
        # makes the URL longer than httpx writes (64 kB; arguments may hold more) failed the call unaudited (redteam47).
        reason = "the request's URL is too long or invalid (an argument too long for a URL)"
        raise _fail(server, reason, "config") from exc
    except httpx.HTTPError as exc:
        raise _fail(server, f"HTTP error calling the service: {type(exc).__name__}", "error") from exc
