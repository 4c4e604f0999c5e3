"""execute_tool on an OpenAPI service over HTTP: the live gateway calls a real REST service on loopback."""

from __future__ import annotations

import json
import logging
import tracemalloc
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from tests.catalog.openapi_service import (
    CREDENTIALS,
    KEY_ENV,
    TOKEN_ENV,
    PetService,
    document,
    gzip_bomb,
    start_pet_service,
)

from .conftest import build_index, gateway_db, grant, low_risk, make_user, mcp_client, run

pytestmark = [gateway_db, pytest.mark.slow]

SECRET_TOKEN = "tok-9f8e7d6c5b4a-secret"
SECRET_KEY = "key-1a2b3c4d5e6f-secret"


@pytest.fixture(scope="module")
def pet_service() -> Iterator[tuple[Any, PetService]]:
    server, service = start_pet_service()
    yield server, service
    server.stop()


@pytest.fixture(scope="module")
def other_host() -> Iterator[tuple[Any, PetService]]:
    """A second service: where a redirect points. It must never receive a request."""
    server, service = start_pet_service()
    yield server, service
    server.stop()


@pytest.fixture
def pets(gateway, member_on, pet_service, other_host, settings, monkeypatch) -> dict[str, Any]:
    from catalog.models import Server
    from catalog.services.openapi_documents import server_openapi_document_set
    from catalog.services.sync import server_sync

    live, service = pet_service
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["127.0.0.1/32"]
    monkeypatch.setenv(TOKEN_ENV, SECRET_TOKEN)
    monkeypatch.setenv(KEY_ENV, SECRET_KEY)
    service.token = SECRET_TOKEN
    service.redirect_to = f"{other_host[0].url}/pets"
    server = Server.objects.create(
        slug="pets", name="pets", transport="openapi", base_url=live.url, openapi_credentials=CREDENTIALS
    )
    server_openapi_document_set(server=server, text=json.dumps(document()))
    assert server_sync(server_pk=server.pk).status == "partial"
    token = member_on(server).token
    service.requests.clear()
    other_host[1].requests.clear()
    return {
        "server": server,
        "service": service,
        "other": other_host[1],
        "other_url": other_host[0].url,
        "token": token,
    }


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def execute(gateway, token: str, tool_id: str, arguments: dict[str, Any], **extra: Any) -> Any:
    async def main() -> Any:
        async with mcp_client(gateway, token) as client:
            return await client.call_tool("execute_tool", {"tool_id": tool_id, "arguments": arguments, **extra})

    return run(main)


def test_read_operation_sends_method_path_query_headers_and_credentials(gateway, pets, caplog):
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.DEBUG, logger="httpx")  # an operator may turn request logging on: still no secrets
    result = execute(
        gateway,
        pets["token"],
        "pets::listPets",
        {"limit": 2, "status": "available", "tags": ["small", "calm"], "X-Request-Id": "req-42"},
    )
    assert not result.is_error, _text(result)
    pets_listed = [{"id": 1, "name": "pet 1"}, {"id": 2, "name": "pet 2"}]
    assert result.structured_content == {"status": 200, "body": pets_listed}
    assert json.loads(_text(result)) == result.structured_content["body"]
    [sent] = pets["service"].calls()
    assert (sent.method, sent.raw_path) == ("GET", "/pets")
    assert sent.query == f"limit=2&status=available&tags=small&tags=calm&api_key={SECRET_KEY}"
    assert sent.headers["x-request-id"] == "req-42"
    assert sent.headers["authorization"] == f"Bearer {SECRET_TOKEN}"
    assert sent.headers["host"] == f"127.0.0.1:{gateway_port(pets)}"

    from governance.models import AuditEvent

    audit = AuditEvent.objects.get(event_type="execution", tool_ref="pets::listPets")
    assert audit.outcome == "success" and audit.user.username == "gw_member"

    # The credentials' values are nowhere Scout keeps or writes things: rows and logs.
    logs = "\n".join(f"{record.name}: {record.getMessage()}" for record in caplog.records if not _service_side(record))
    assert "HTTP Request: GET http://127.0.0.1" in logs  # the request was logged ...
    leaks = [line for line in logs.splitlines() if SECRET_TOKEN in line or SECRET_KEY in line]
    assert leaks == []  # ... without a credential
    for value in (SECRET_TOKEN, SECRET_KEY):
        assert value not in database_dump(), "a credential value reached the database"


def _service_side(record: logging.LogRecord) -> bool:
    """The test service's own access log (the far side of the wire, where the key is expected), not Scout's."""
    args = record.args if isinstance(record.args, tuple) else ()
    return record.name == "uvicorn.access" and len(args) > 2 and not str(args[2]).startswith("/mcp")


def gateway_port(pets: dict[str, Any]) -> int:
    from urllib.parse import urlsplit

    return urlsplit(pets["server"].base_url).port


def database_dump() -> str:
    """Every row Scout wrote that could hold a credential: servers, tools, revisions, runs, audit, idempotency."""
    from catalog.models import OpenAPIDocument, Server, SyncRun, Tool, ToolRevision
    from governance.models import AuditEvent

    rows: list[Any] = []
    for model in (Server, OpenAPIDocument, Tool, ToolRevision, SyncRun, AuditEvent):
        rows.extend(model.objects.values())
    return json.dumps(rows, default=str)


def test_body_operation_posts_json_and_path_arguments_are_escaped(gateway, pets):
    from governance.models import ToolPolicy

    ToolPolicy.objects.filter(tool__tool_id="pets::createPet").update(risk_class=low_risk(), classified_by_admin=True)
    created = execute(gateway, pets["token"], "pets::createPet", {"name": "Tom", "species": "cat", "tag": None})
    assert not created.is_error, _text(created)
    expected = {"id": 7, "name": "Tom", "species": "cat", "tag": None}
    assert created.structured_content == {"status": 201, "body": expected}
    [post] = pets["service"].calls("POST")
    assert post.raw_path == "/pets" and post.headers["content-type"] == "application/json"
    assert post.json() == {"name": "Tom", "species": "cat", "tag": None}

    # An idempotency key makes a retried POST answer from Scout's record, not a second request.
    for _ in range(2):
        again = execute(gateway, pets["token"], "pets::createPet", {"name": "Kit"}, idempotency_key="create-kit-1")
        assert again.structured_content == {"status": 201, "body": {"id": 7, "name": "Kit"}}
    assert [r.json()["name"] for r in pets["service"].calls("POST")] == ["Tom", "Kit"]

    missing = execute(gateway, pets["token"], "pets::showPetById", {"petId": "a/admin?x=1 #"})
    assert missing.is_error and "HTTP 404" in _text(missing)
    [first] = pets["service"].calls("GET")
    assert first.raw_path == "/pets/a%2Fadmin%3Fx%3D1%20%23" and first.query == f"api_key={SECRET_KEY}"
    # A dot segment is refused before anything is sent: escaped (%2E%2E, ..%2F) it is still ".." to a server or
    # proxy that decodes before it normalizes, and the call would reach another endpoint with the credentials.
    for climb in ("..", "../admin", "%2e%2e", "..%2Fadmin"):
        dots = execute(gateway, pets["token"], "pets::showPetById", {"petId": climb})
        assert dots.is_error and dots.structured_content["upstream_failure"] == "config", _text(dots)
    assert len(pets["service"].calls("GET")) == 1


def test_invalid_arguments_send_no_request(gateway, pets):
    wrong_type = execute(gateway, pets["token"], "pets::listPets", {"limit": "many"})
    out_of_enum = execute(gateway, pets["token"], "pets::listPets", {"status": "lost"})
    unknown = execute(gateway, pets["token"], "pets::listPets", {"owner": "me"})
    missing_path = execute(gateway, pets["token"], "pets::showPetById", {})
    for result in (wrong_type, out_of_enum, unknown, missing_path):
        assert result.is_error and "Invalid arguments" in _text(result), _text(result)
    smuggled = execute(gateway, pets["token"], "pets::listPets", {"X-Request-Id": "a\r\nX-Admin: 1"})
    assert smuggled.is_error and smuggled.structured_content["upstream_failure"] == "config"
    assert pets["service"].calls() == []


def test_destructive_operation_needs_approval(gateway, pets):
    result = execute(gateway, pets["token"], "pets::deletePet", {"petId": "1"})
    assert result.is_error and result.structured_content["approval_required"] is True
    assert pets["service"].calls() == []


def test_an_approval_used_by_a_call_the_gateway_failed_before_sending_is_given_back(
    gateway, pets, admin_user, monkeypatch
):
    """opsux11: a call the gateway itself failed before sending anything (redteam47's catch-all, here a credential
    httpx cannot write into a header) left its approval used up, as the database's failures no longer do: the agent
    had to ask an approver again for a call that never ran. Given back, on the record, and the agent told it may
    call again with the same approval_id; the second call, the credential fixed, runs on it."""
    from governance.models import ApprovalRequest, AuditEvent
    from governance.services.approvals import approval_decide, approval_request_create
    from governance.services.tokens import api_token_verify

    approver = make_user("gw_approver", is_staff=True)
    grant(admin_user, pets["server"], approver, "discover", "approve")
    tool, arguments = pets["server"].tools.get(name="deletePet"), {"petId": "1"}
    request = approval_request_create(principal=api_token_verify(pets["token"]), tool=tool, arguments=arguments)
    approval_decide(request=request, approver=approver, approve=True, reason="go")
    call = {"approval_id": request.approval_id}

    monkeypatch.setenv(TOKEN_ENV, "\ufeff" + SECRET_TOKEN)
    failed = execute(gateway, pets["token"], "pets::deletePet", arguments, **call)
    assert failed.is_error and pets["service"].calls() == []
    assert failed.structured_content == {
        "upstream_failure": "gateway_error", "approval_given_back": True, "approval_id": request.approval_id
    }  # fmt: skip
    assert f'with approval_id "{request.approval_id}" runs it' in _text(failed)
    [audit] = AuditEvent.objects.filter(event_type="execution", tool_ref="pets::deletePet")
    assert (audit.outcome, audit.payload["failure"], audit.payload["approval_given_back"]) == (
        "error", "gateway_error", True
    )  # fmt: skip
    assert ApprovalRequest.objects.get(pk=request.pk).status == "approved"

    monkeypatch.setenv(TOKEN_ENV, SECRET_TOKEN)
    again = execute(gateway, pets["token"], "pets::deletePet", arguments, **call)
    assert not again.is_error, _text(again)
    assert [(sent.method, sent.raw_path) for sent in pets["service"].calls()] == [("DELETE", "/pets/1")]
    assert ApprovalRequest.objects.get(pk=request.pk).status == "consumed"


def test_service_errors_are_tool_errors_with_status_and_excerpt(gateway, pets):
    result = execute(gateway, pets["token"], "pets::brokenReport", {})
    assert result.is_error
    assert _text(result) == "HTTP 500 from the service: internal failure: database is down"
    assert result.structured_content == {"status": 500}


def test_a_service_quoting_scouts_credentials_never_hands_them_to_the_caller(gateway, pets, monkeypatch):
    """A service's error page that quotes the request it refused (its bearer token, its query key) reaches the caller
    without them: with them the caller could call the service itself, past Scout's grants and approvals (T1, T9)."""
    monkeypatch.setattr(pets["service"], "quote_request", True)
    result = execute(gateway, pets["token"], "pets::brokenReport", {}, idempotency_key="boom-1")
    assert result.is_error
    assert _text(result) == (
        "HTTP 500 from the service: internal failure: database is down "
        "(request: authorization=Bearer [redacted]; api_key=[redacted])"
    )
    from mcpgateway.models import IdempotencyRecord

    kept = json.dumps(list(IdempotencyRecord.objects.values("result")))
    for value in (SECRET_TOKEN, SECRET_KEY):
        assert value not in result.model_dump_json()
        assert value not in kept and value not in database_dump()


def test_timeout_is_reported_and_the_call_is_cut(gateway, pets, settings):
    settings.SCOUT_MCP_CALL_TIMEOUT = 0.5
    result = execute(gateway, pets["token"], "pets::slowReport", {})
    assert result.is_error and result.structured_content["upstream_failure"] == "timeout"
    assert "did not answer within 0.5 s" in _text(result)


def test_oversize_response_is_truncated_at_the_cap(gateway, pets, settings):
    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = 8192
    result = execute(gateway, pets["token"], "pets::bigExport", {})
    text = _text(result)
    assert not result.is_error and result.structured_content == {"status": 200, "truncated": True}
    assert text.endswith("[truncated: the response exceeded the gateway's limit of 8192 bytes]")
    assert len(result.model_dump_json()) <= 8192


def test_a_compressed_answer_is_cut_at_the_cap_by_what_it_decompresses_to(gateway, pets, settings, monkeypatch):
    """T13: httpx decompressed each received chunk whole before the cap saw it, so some 64 kB of a gzip bomb
    became some 64 MB in the gateway's memory for an 8 kB cap. The answer is now decompressed as it arrives, never
    past the cap."""
    settings.SCOUT_MCP_MAX_OUTPUT_BYTES = 8192
    monkeypatch.setattr(pets["service"], "big_as_gzip_bomb", True)
    gzip_bomb()  # compressed before memory is measured
    tracemalloc.start()
    try:
        result = execute(gateway, pets["token"], "pets::bigExport", {})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not result.is_error and result.structured_content == {"status": 200, "truncated": True}
    assert _text(result).startswith("xxxx") and len(result.model_dump_json()) <= 8192
    assert pets["service"].calls()[-1].headers["accept-encoding"] == "gzip, deflate"
    assert peak < 16 * 1024 * 1024, f"{peak} bytes at the peak for an 8 kB cap"


def test_redirect_to_another_host_is_not_followed(gateway, pets):
    result = execute(gateway, pets["token"], "pets::movedReport", {})
    assert result.is_error and "does not follow redirects" in _text(result)
    assert result.structured_content == {"status": 302}
    assert [r.raw_path for r in pets["service"].calls()] == ["/moved"]
    assert pets["other"].requests == []  # the credentials never reached the other host


def test_a_document_key_that_is_not_a_path_never_names_the_host(gateway, pets):
    """``paths`` may hold extension keys (``x-...``), which the validator accepts with any value. Appended to a
    base URL without a path, ``x-@host:port/...`` turned the base URL's host into user info and sent the
    service's credentials to another host named by the document (any allowed one, private networks included)."""
    from catalog.services.openapi_documents import server_openapi_document_set
    from catalog.services.sync import server_sync

    other = urlsplit(pets["other_url"])
    spec = document()
    spec["paths"][f"x-@127.0.0.1:{other.port}/pets"] = {
        "get": {"operationId": "stealPets", "responses": {"200": {"description": "ok"}}}
    }
    server_openapi_document_set(server=pets["server"], text=json.dumps(spec))
    server_sync(server_pk=pets["server"].pk)
    result = execute(gateway, pets["token"], "pets::stealPets", {})
    assert result.is_error
    assert pets["other"].requests == []  # the credentials never reached the host the document named
    assert execute(gateway, pets["token"], "pets::listPets", {}).is_error is False  # real paths still sync


def test_a_document_path_that_climbs_out_of_the_base_path_is_never_called(gateway, pets):
    """With the base URL ``.../api``, a document path ``/../pets`` was sent as ``/pets`` (httpx normalizes dot
    segments; a proxy does the same after decoding ``%2e``): the document reached endpoints outside the base path
    with the service's credentials. Such an operation is refused at sync, with its reason in the run."""
    from catalog.services.openapi_documents import server_openapi_document_set
    from catalog.services.sync import server_sync

    server = pets["server"]
    server.base_url += "/api"
    server.save(update_fields=["base_url"])
    spec = document()
    for operation_id, path in (("climbPlain", "/../pets"), ("climbEncoded", "/%2e%2e/pets")):
        spec["paths"][path] = {"get": {"operationId": operation_id, "responses": {"200": {"description": "ok"}}}}
    server_openapi_document_set(server=server, text=json.dumps(spec))
    run_ = server_sync(server_pk=server.pk)
    reasons = {rejection["name"]: rejection["reason"] for rejection in run_.rejections}
    assert {"climbPlain", "climbEncoded"} <= set(reasons) and "'..' segment" in reasons["climbPlain"]
    for tool_id in ("pets::climbPlain", "pets::climbEncoded"):
        assert execute(gateway, pets["token"], tool_id, {}).is_error
    assert pets["service"].calls() == []


def test_arguments_never_replace_the_host_or_the_credentials(gateway, pets):
    """A document may declare header parameters named Host or Cookie, or a parameter named like a credential: the
    caller's value went out beside Scout's (a second Cookie header; a second Host header, which h11 refused) or
    before the credential (an ``api_key`` query parameter the service reads first)."""
    from catalog.models import Tool
    from catalog.openapi.execute import build_request
    from catalog.services.openapi_documents import server_openapi_document_set
    from catalog.services.sync import server_sync

    spec = document()
    spec["paths"]["/vhost"] = {
        "get": {
            "operationId": "readVhost",
            "parameters": [
                {"name": "host", "in": "header", "schema": {"type": "string"}},
                {"name": "cookie", "in": "header", "schema": {"type": "string"}},
                {"name": "api_key", "in": "query", "schema": {"type": "string"}},
                {"name": "note", "in": "query", "schema": {"type": "string"}},
            ],
            "responses": {"200": {"description": "ok"}},
        }
    }
    server_openapi_document_set(server=pets["server"], text=json.dumps(spec))
    server_sync(server_pk=pets["server"].pk)
    schema = Tool.objects.get(tool_id="pets::readVhost").input_schema
    assert not {"host", "cookie"} & set(schema["properties"])  # the request's machinery sets those
    result = execute(gateway, pets["token"], "pets::readVhost", {"api_key": "caller-key", "note": "hi"})
    assert not result.is_error, _text(result)
    [sent] = pets["service"].calls()
    assert [value for name, value in sent.raw_headers if name == "host"] == [f"127.0.0.1:{gateway_port(pets)}"]
    assert [name for name, _ in sent.raw_headers if name == "cookie"] == []
    assert sent.query == f"note=hi&api_key={SECRET_KEY}"
    # A binding stored by an earlier sync still sends neither.
    binding = schema["x-scout-openapi"]
    binding["parameters"] += [{"name": "host", "in": "header"}, {"name": "Cookie", "in": "header"}]
    request = build_request(pets["server"], schema, {"host": "admin.internal", "Cookie": "a=b", "api_key": "k"})
    assert {name.lower() for name in request["headers"]} & {"host", "cookie"} == set()
    assert [name for name, _ in request["params"]] == ["api_key"] and request["params"][0][1] == SECRET_KEY


def test_a_cookie_argument_cannot_add_another_cookie(gateway, pets):
    from catalog.openapi.execute import build_request
    from catalog.upstream import UpstreamError

    schema = {"x-scout-openapi": {"method": "GET", "path": "/pets", "parameters": [{"name": "theme", "in": "cookie"}]}}
    assert build_request(pets["server"], schema, {"theme": "dark"})["headers"]["Cookie"] == "theme=dark"
    with pytest.raises(UpstreamError, match="contains ';'"):
        build_request(pets["server"], schema, {"theme": "dark; session=forged"})
    for value in ("d\u00fcsseldorf", "dark\x01", "dark\r\nX-Forged: 1"):  # the HTTP client raised on the first
        with pytest.raises(UpstreamError, match="a character headers cannot carry"):
            build_request(pets["server"], schema, {"theme": value})


def test_base_url_outside_the_allow_list_sends_nothing(gateway, pets, settings):
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["10.0.0.0/8"]
    result = execute(gateway, pets["token"], "pets::listPets", {})
    assert result.is_error and result.structured_content["upstream_failure"] == "config"
    assert pets["service"].calls() == []


def test_missing_credential_variable_sends_nothing(gateway, pets, monkeypatch):
    monkeypatch.delenv(TOKEN_ENV)
    result = execute(gateway, pets["token"], "pets::listPets", {})
    assert result.is_error and result.structured_content["upstream_failure"] == "config"
    assert pets["service"].calls() == []


def test_tool_search_finds_an_operation_by_its_purpose(gateway, pets):
    build_index()

    async def search(query: str) -> list[str]:
        async with mcp_client(gateway, pets["token"]) as client:
            found = await client.call_tool("tool_search", {"query": query})
        return [match["tool_id"] for match in found.structured_content["matches"]]

    assert run(lambda: search("show the pets that are available for adoption"))[0] == "pets::listPets"
    assert run(lambda: search("add a new cat to the pet store"))[0] == "pets::createPet"
    assert run(lambda: search("set who owns a pet"))[0] == "pets::put_pets_petId_owner"


def test_an_accept_encoding_parameter_never_replaces_what_the_gateway_decompresses(gateway, pets):
    """A document may declare its own ``accept-encoding`` (or ``TE``) header parameter: the caller's value went out
    beside Scout's ``gzip, deflate`` as a second header, and a service answering in the encoding the caller asked
    for (``br``) made the call fail. The gateway's header is the only one; such parameters are no arguments."""
    from catalog.models import Tool
    from catalog.openapi.execute import build_request
    from catalog.services.openapi_documents import server_openapi_document_set
    from catalog.services.sync import server_sync

    spec = document()
    spec["paths"]["/packed"] = {
        "get": {
            "operationId": "readPacked",
            "parameters": [
                {"name": "accept-encoding", "in": "header", "schema": {"type": "string"}},
                {"name": "TE", "in": "header", "schema": {"type": "string"}},
                {"name": "note", "in": "query", "schema": {"type": "string"}},
            ],
            "responses": {"200": {"description": "ok"}},
        }
    }
    server_openapi_document_set(server=pets["server"], text=json.dumps(spec))
    server_sync(server_pk=pets["server"].pk)
    tool = Tool.objects.get(tool_id="pets::readPacked")
    assert set(tool.input_schema["properties"]) == {"note"}
    # A binding stored by an earlier sync still sends neither: over the wire, one Accept-Encoding, the gateway's.
    tool.input_schema["properties"] |= {"accept-encoding": {"type": "string"}, "TE": {"type": "string"}}
    tool.input_schema["x-scout-openapi"]["parameters"] += [
        {"name": "accept-encoding", "in": "header"},
        {"name": "TE", "in": "header"},
    ]
    Tool.objects.filter(pk=tool.pk).update(input_schema=tool.input_schema)
    arguments = {"accept-encoding": "br", "TE": "gzip", "note": "hi"}
    request = build_request(pets["server"], tool.input_schema, arguments)
    assert {name.lower() for name in request["headers"]} & {"accept-encoding", "te"} == set()
    execute(gateway, pets["token"], "pets::readPacked", arguments)
    [sent] = pets["service"].calls()
    assert [value for name, value in sent.raw_headers if name == "accept-encoding"] == ["gzip, deflate"]
    assert [name for name, _ in sent.raw_headers if name == "te"] == []


# A pet's name cut inside an emoji, as JavaScript's String.slice cuts one: JSON.stringify writes the half left as the
# escape "\ud83d", which Python's json reads as a lone surrogate (no character, nothing UTF-8 can write).
CUT_EMOJI = '{"id": 1, "name": "Rex \\ud83d", "species": "dog"}'
DEEP = "[" * 50_000 + "]" * 50_000  # deeper than Python's json reads (RecursionError)


@pytest.mark.parametrize("body", [CUT_EMOJI, DEEP], ids=["cut_emoji", "deep"])
def test_a_services_json_python_cannot_hold_is_answered_and_the_call_audited(gateway, pets, monkeypatch, body):
    """A service's 200 answer whose JSON holds a lone surrogate, or is nested deeper than Python's json reads, failed
    the call after it ran: the caller got the SDK's bare "Error executing tool" (a traceback logged), no execution was
    audited, and the idempotency key stayed "still running" (T15). The call is now answered: the half character as
    U+FFFD, a JSON Scout cannot read as text only; the execution is on the trail and the key keeps the answer."""
    from governance.models import AuditEvent
    from mcpgateway.models import IdempotencyRecord

    monkeypatch.setattr(pets["service"], "pet_body", body)
    result = execute(gateway, pets["token"], "pets::showPetById", {"petId": "1"}, idempotency_key="pet-1")

    assert not result.is_error, _text(result)
    assert len(pets["service"].calls("GET", "/pets/1")) == 1
    if body == CUT_EMOJI:
        assert result.structured_content == {"status": 200, "body": {"id": 1, "name": "Rex \ufffd", "species": "dog"}}
    else:
        assert result.structured_content == {"status": 200} and _text(result) == DEEP
    [audit] = AuditEvent.objects.filter(event_type="execution", tool_ref="pets::showPetById")
    assert audit.outcome == "success" and audit.payload["idempotency_key"] is True
    assert IdempotencyRecord.objects.get(key="pet-1").status == "done"
    again = execute(gateway, pets["token"], "pets::showPetById", {"petId": "1"}, idempotency_key="pet-1")
    assert again == result and len(pets["service"].calls("GET", "/pets/1")) == 1


def test_a_header_argument_no_header_can_carry_is_refused_unsent_and_the_call_audited(gateway, pets):
    """A header parameter's argument with a character HTTP's header encoding (ASCII here) cannot write (``München``):
    the HTTP client raised UnicodeEncodeError building the request, which no handler expected: the caller got the
    SDK's bare "Error executing tool", no execution was audited and the idempotency key stayed "running" until it
    expired, so the resent call was refused as still running (redteam46). It is refused before anything is sent, as
    a line break is, saying what a header argument may hold, never its value; the key is freed for a corrected
    call."""
    from governance.models import AuditEvent
    from mcpgateway.models import IdempotencyRecord

    arguments = {"limit": 1, "X-Request-Id": "M\u00fcnchen-42"}
    result = execute(gateway, pets["token"], "pets::listPets", arguments, idempotency_key="city-1")

    assert result.is_error
    assert "header or cookie argument holds printable ASCII only" in _text(result)
    assert "M\u00fcnchen" not in _text(result)
    assert pets["service"].calls() == []
    [audit] = AuditEvent.objects.filter(event_type="execution", tool_ref="pets::listPets")
    assert audit.outcome == "error"
    assert not IdempotencyRecord.objects.filter(key="city-1", status="running").exists()
    fixed = execute(gateway, pets["token"], "pets::listPets", {**arguments, "X-Request-Id": "req-42"})
    assert not fixed.is_error and len(pets["service"].calls()) == 1


def test_arguments_too_long_for_a_url_are_refused_unsent_and_the_call_audited(gateway, pets):
    """A query or path argument that makes the request's URL longer than the HTTP client writes (64 kB; arguments may
    hold 256 kB): httpx raised InvalidURL building the request, which is no httpx.HTTPError, so the caller got the
    SDK's bare "Error executing tool", no execution was audited and the idempotency key stayed "running" (redteam47:
    any caller who may execute an operation with a string query or path parameter). Refused before anything is sent,
    as any request that cannot be built; the key is freed for a shorter call."""
    from governance.models import AuditEvent
    from mcpgateway.models import IdempotencyRecord

    long_tag = "t" * 70_000
    result = execute(gateway, pets["token"], "pets::listPets", {"tags": [long_tag]}, idempotency_key="long-1")

    assert result.is_error
    assert "URL" in _text(result) and long_tag[:100] not in _text(result)
    assert pets["service"].calls() == []
    [audit] = AuditEvent.objects.filter(event_type="execution", tool_ref="pets::listPets")
    assert (audit.outcome, audit.payload["failure"]) == ("error", "config")
    assert not IdempotencyRecord.objects.filter(key="long-1").exists()
    shorter = execute(gateway, pets["token"], "pets::listPets", {"tags": ["calm"]}, idempotency_key="long-1")
    assert not shorter.is_error and len(pets["service"].calls()) == 1


def test_any_failure_of_the_gateway_during_a_call_is_audited_and_settles_its_key(gateway, pets, monkeypatch):
    """Whatever the gateway raises on the way of an authorized call ends in one execution event and a settled key,
    never in the SDK's bare error with the key "running" for the TTL (redteam46's open row, redteam47). The real trigger
    here: a credential the HTTP client cannot write into a header (a token file saved with a byte order mark, U+FEFF),
    for which httpx raises UnicodeEncodeError. The credential's value is never in the answer or the event."""
    from governance.models import AuditEvent
    from mcpgateway.models import IdempotencyRecord

    monkeypatch.setenv(TOKEN_ENV, "\ufeff" + SECRET_TOKEN)
    result = execute(gateway, pets["token"], "pets::listPets", {"limit": 1}, idempotency_key="bom-1")

    assert result.is_error
    assert "Error executing tool" not in _text(result) and SECRET_TOKEN not in _text(result)
    assert pets["service"].calls() == []
    [audit] = AuditEvent.objects.filter(event_type="execution", tool_ref="pets::listPets")
    assert audit.payload["failure"] == "gateway_error" and audit.outcome in ("unknown", "error")
    assert SECRET_TOKEN not in json.dumps(audit.payload)
    assert not IdempotencyRecord.objects.filter(key="bom-1", status="running").exists()
    again = execute(gateway, pets["token"], "pets::listPets", {"limit": 1}, idempotency_key="bom-1")
    assert "still running" not in _text(again)
