"""C1-15: a tool whose schema declares ``x-mcp-header`` (2026-07-28 ``Mcp-Param-*`` headers) over HTTP."""

from __future__ import annotations

import base64
from typing import Annotated, Any

import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from pydantic import Field

from tests.catalog.servers.fixtures import good_tool

from .conftest import (
    MODERN,
    PROTOCOL_MODES,
    ThreadedUvicorn,
    drop_index,
    gateway_db,
    mcp_client,
    modern_request,
    raw_post,
    rpc_result,
    run,
    sync_scripted_server,
    sync_server,
)

pytestmark = [gateway_db, pytest.mark.slow]
SEEN: list[str] = []
# What the labels upstream received from Scout: (Mcp-Method header, Mcp-Param-Label header, HTTP status answered).
RECEIVED: list[tuple[str | None, str | None, int]] = []


def _labels_upstream() -> Any:
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    upstream = MCPServer("labels")

    @upstream.tool(annotations=ToolAnnotations(readOnlyHint=True, destructiveHint=False))
    def echo(label: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Label"})]) -> str:
        """Echo a label back."""
        SEEN.append(label)
        return f"label={label!r}"

    app = upstream.streamable_http_app(stateless_http=False)

    async def recorded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return await app(scope, receive, send)
        headers = {name.decode().lower(): value.decode("latin-1") for name, value in scope["headers"]}

        async def send_recorded(message: Any) -> None:
            if message["type"] == "http.response.start":
                RECEIVED.append((headers.get("mcp-method"), headers.get("mcp-param-label"), message["status"]))
            await send(message)

        await app(scope, receive, send_recorded)

    return recorded


@pytest.fixture(scope="module")
def labels_upstream():
    server = ThreadedUvicorn(_labels_upstream()).start()
    yield server
    server.stop()


@pytest.fixture
def labels(gateway, member_on, labels_upstream) -> str:
    """A member's token; the labels server's tool is listed directly (no search index)."""
    server = sync_server(slug="labels", transport="http", url=f"{labels_upstream.url}/mcp")
    assert server.tools.get().input_schema["properties"]["label"]["x-mcp-header"] == "Label"
    token = member_on(server).token
    drop_index()
    SEEN.clear()
    RECEIVED.clear()
    return token


def _sentinel(text: str) -> str:
    return f"=?base64?{base64.b64encode(text.encode()).decode()}?="


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_a_value_with_crlf_or_non_ascii_is_mirrored_in_base64_and_reaches_the_upstream_exactly(labels, gateway, mode):
    """The listed schema keeps the annotation, so the SDK client mirrors the argument into Mcp-Param-Label (base64
    for CRLF and non-ASCII) at 2026-07-28; a 2025 client sends no such header and is served as before."""
    sent: list[str] = []

    async def record(request: Any) -> None:
        sent.extend(value for name, value in request.headers.items() if name.lower() == "mcp-param-label")

    async def main():
        http_client = httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {labels}"}, timeout=60, event_hooks={"request": [record]}
        )
        async with Client(streamable_http_client(f"{gateway.url}/mcp", http_client=http_client), mode=mode) as client:
            listed = {tool.name: tool.input_schema for tool in (await client.list_tools()).tools}
            return listed, await client.call_tool("labels__echo", {"label": "a\r\nb ü"})

    listed, result = run(main)
    assert listed["labels__echo"]["properties"]["label"]["x-mcp-header"] == "Label"
    assert not result.is_error and SEEN == ["a\r\nb ü"]
    assert sent == ([_sentinel("a\r\nb ü")] if mode == MODERN else [])


def test_a_header_that_disagrees_with_the_argument_is_refused_and_nothing_is_sent(labels, gateway):
    """Mcp-Param-Label saying another value than the body, a malformed sentinel, raw non-ASCII bytes, or no header
    for an argument the schema mirrors: 400, -32020, and the upstream is never called. Before, each ran with the
    body's value, so a proxy or policy reading the header let one call through while another ran (T11)."""
    body = modern_request("tools/call", {"name": "labels__echo", "arguments": {"label": "ü"}})
    refused = {
        "another value": "y",
        "malformed sentinel": "=?base64?!!?=",
        "raw non-ASCII bytes": "ü".encode(),
        "absent": None,
    }
    for case, value in refused.items():
        headers = {} if value is None else {"Mcp-Param-Label": value}
        response = raw_post(gateway, body, token=labels, headers=headers)
        assert response.status_code == 400, (case, response.text)
        error = rpc_result(response)["error"]
        assert error["code"] == -32020 and "Mcp-Param-Label header" in error["message"], (case, error)
    assert SEEN == []
    agreeing = raw_post(gateway, body, token=labels, headers={"Mcp-Param-Label": _sentinel("ü")})
    assert agreeing.status_code == 200 and rpc_result(agreeing)["result"]["isError"] is False, agreeing.text
    assert SEEN == ["ü"]


def test_a_header_sent_with_an_unknown_tool_name_changes_nothing_in_the_answer(labels, gateway):
    """The check runs once the tool is known to be the caller's: a name the caller cannot see answers the same with
    or without the header (tool existence is protected)."""
    body = modern_request("tools/call", {"name": "labels__nope", "arguments": {"label": "x"}})
    plain = raw_post(gateway, body, token=labels)
    with_header = raw_post(gateway, body, token=labels, headers={"Mcp-Param-Label": "y"})
    assert (plain.status_code, rpc_result(plain)["error"]) == (
        with_header.status_code,
        rpc_result(with_header)["error"],
    )
    assert rpc_result(plain)["error"]["code"] == -32602


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_scouts_own_call_to_the_upstream_mirrors_the_argument_into_its_header(labels, gateway, mode):
    """Scout calls a 2026-07-28 upstream as the SDK client would: the synced schema's x-mcp-header argument goes out
    as Mcp-Param-Label (base64 for CRLF and non-ASCII), whatever version Scout's own caller speaks. Before, Scout's
    call sessions listed no tools, so the first call of each session went out without it: the upstream refused it
    (400, -32020) and the SDK listed every tool of the server again and resent the call (three requests, and the
    call failed whenever that listing failed)."""

    async def main():
        async with mcp_client(gateway, labels, mode) as client:
            first = await client.call_tool("labels__echo", {"label": "a\r\nb ü"})
            second = await client.call_tool("labels__echo", {"label": "plain"})
            return first, second

    first, second = run(main)
    assert not first.is_error and not second.is_error and SEEN == ["a\r\nb ü", "plain"]
    calls = [request for request in RECEIVED if request[0] != "server/discover"]  # the call session's opening
    assert calls == [("tools/call", _sentinel("a\r\nb ü"), 200), ("tools/call", "plain", 200)]


def test_a_tool_2026_clients_would_drop_is_listed_to_no_client(gateway, member_on, tmp_path):
    """A tool whose x-mcp-header annotation is invalid is refused at sync, so every client, whatever its version,
    sees the same tools. Before, Scout listed it: a 2025 client saw it and a 2026-07-28 client dropped it (as the
    spec requires), so one agent could call a tool another was never shown."""
    properties = {"n": {"type": "number", "x-mcp-header": "N"}, "region": {"type": "string", "x-mcp-header": "Region"}}
    invalid = good_tool("invalid", inputSchema={"type": "object", "properties": properties})
    valid = good_tool("valid", inputSchema={"type": "object", "properties": {"r": properties["region"]}})
    server = sync_scripted_server(tmp_path, "annotated", {"pages": [[invalid, valid]]})
    token = member_on(server).token
    drop_index()

    async def listed(mode: str) -> set[str]:
        async with mcp_client(gateway, token, mode) as client:
            return {tool.name for tool in (await client.list_tools()).tools if tool.name.startswith("annotated__")}

    assert {mode: run(lambda mode=mode: listed(mode)) for mode in PROTOCOL_MODES} == {
        mode: {"annotated__valid"} for mode in PROTOCOL_MODES
    }
