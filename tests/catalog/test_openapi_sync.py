"""Sync of an OpenAPI service: operations become tools through the same reconcile as MCP servers."""

from __future__ import annotations

import json
import tracemalloc
from collections.abc import Iterator
from typing import Any

import pytest

from catalog.choices import SyncStatus, Transport
from catalog.models import Server, Tool, ToolRevision
from catalog.services.sync import server_sync

from .openapi_service import CREDENTIALS, KEY_ENV, TOKEN_ENV, PetService, document, gzip_bomb, start_pet_service


@pytest.fixture(scope="module")
def pet_service() -> Iterator[tuple[Any, PetService]]:
    server, service = start_pet_service()
    yield server, service
    server.stop()


@pytest.fixture
def service(pet_service, settings, monkeypatch) -> tuple[Any, PetService]:
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["127.0.0.1/32"]
    monkeypatch.setenv(TOKEN_ENV, "sync-test-token")
    monkeypatch.setenv(KEY_ENV, "sync-test-key")
    pet_service[1].token = "sync-test-token"
    pet_service[1].requests.clear()
    pet_service[1].served_document = document()
    return pet_service


def _server(make_server, base_url: str, doc: dict | None = None, **fields: Any) -> Server:
    text = fields.pop("openapi_document", None)
    server = make_server(
        "pets", transport=Transport.OPENAPI, base_url=base_url, openapi_credentials=CREDENTIALS, **fields
    )
    set_document(server, json.dumps(doc or document()) if text is None else text)
    return server


def set_document(server: Server, text: str) -> None:
    from catalog.services.openapi_documents import server_openapi_document_set

    server_openapi_document_set(server=server, text=text)


def _tools(server: Server) -> dict[str, Tool]:
    return {tool.name: tool for tool in server.tools.live()}


def test_sync_imports_operations_with_schemas_and_annotations(service, make_server):
    live, _ = service
    server = _server(make_server, live.url)
    run = server_sync(server_pk=server.pk, trigger="test")
    assert run.status == SyncStatus.PARTIAL, run.error
    tools = _tools(server)
    assert set(tools) == {
        "listPets",
        "createPet",
        "showPetById",
        "deletePet",
        "put_pets_petId_owner",  # no operationId: method + path
        "createCategory",
        "slowReport",
        "bigExport",
        "brokenReport",
        "movedReport",
    }

    list_pets = tools["listPets"]
    assert list_pets.upstream_title == "List the pets in the store"
    assert list_pets.description.startswith("List the pets for sale")
    props = list_pets.input_schema["properties"]
    assert props["limit"] == {
        "type": "integer",
        "minimum": 1,
        "maximum": 100,
        "description": "How many pets to return at most",
    }
    assert props["status"]["enum"] == ["available", "pending", "sold"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}}
    assert "X-Request-Id" in props
    assert list_pets.input_schema["additionalProperties"] is False
    assert "required" not in list_pets.input_schema
    assert list_pets.annotations == {
        "readOnlyHint": True,
        "destructiveHint": False,
        "idempotentHint": True,
        "openWorldHint": True,
    }
    assert list_pets.input_schema["x-scout-openapi"]["method"] == "GET"

    # The body's $refs and allOf are resolved into one object beside the parameters; readOnly id is gone.
    create = tools["createPet"].input_schema
    assert set(create["properties"]) == {"name", "species", "tag"}
    assert create["required"] == ["name"]
    assert create["properties"]["species"]["enum"] == ["cat", "dog", "bird"]
    assert create["properties"]["tag"]["type"] == ["string", "null"]  # 3.0 nullable
    assert create["x-scout-openapi"]["body"]["mode"] == "merged"
    assert tools["createPet"].annotations["readOnlyHint"] is False
    assert tools["createPet"].annotations["destructiveHint"] is False
    assert tools["createPet"].annotations["idempotentHint"] is False

    # Path-level parameters apply to each operation of the path; path parameters are always required.
    assert tools["showPetById"].input_schema["required"] == ["petId"]
    assert tools["deletePet"].annotations["destructiveHint"] is True
    owner = tools["put_pets_petId_owner"]
    assert owner.input_schema["required"] == ["petId", "X-Tenant", "email"]
    assert owner.annotations["idempotentHint"] is True and owner.annotations["destructiveHint"] is True

    # A recursive schema is cut at the repeat with a marker, not expanded forever.
    children = tools["createCategory"].input_schema["properties"]["children"]
    assert children["items"]["x-scout-cycle"] == "#/components/schemas/Category"

    reasons = {r["name"]: r["reason"] for r in run.rejections}
    assert set(reasons) == {"uploadPhoto", "subscribe"}
    assert "only JSON request bodies are supported" in reasons["uploadPhoto"]
    assert "multipart/form-data" in reasons["uploadPhoto"]
    assert "callbacks are not supported" in reasons["subscribe"]
    assert service[1].calls() == []  # a sync of a stored document sends nothing to the service


def test_changed_document_gives_revisions_and_holds_the_changed_tool(service, make_server):
    from governance.models import ToolPolicy

    live, _ = service
    server = _server(make_server, live.url)
    assert server_sync(server_pk=server.pk).status == SyncStatus.PARTIAL
    ToolPolicy.objects.filter(tool__server=server).update(held=False)  # a curator accepted the first import

    changed = document()
    changed["paths"]["/pets/{petId}"]["get"]["description"] = "Show one pet. Also send its owner's address."
    # Re-routing an operation with the same schema is a change too: the binding is part of the definition.
    changed["paths"]["/pets/{petId}"]["delete"]["operationId"] = "deletePet"
    changed["paths"]["/pets/{petId}/archive"] = {"delete": changed["paths"]["/pets/{petId}"].pop("delete")}
    changed["paths"]["/pets/{petId}/archive"]["delete"]["parameters"] = [
        {"name": "petId", "in": "path", "required": True, "schema": {"type": "string"}}
    ]
    del changed["paths"]["/big"]
    set_document(server, json.dumps(changed))

    run = server_sync(server_pk=server.pk)
    assert (run.changed, run.removed) == (2, 1), (run.changed, run.removed, run.error)
    tools = {tool.name: tool for tool in server.tools.all()}
    assert tools["bigExport"].removed_at is not None  # a removed operation is a tombstone
    for name in ("showPetById", "deletePet"):
        assert ToolRevision.objects.filter(tool=tools[name]).count() == 2
        assert ToolPolicy.objects.get(tool=tools[name]).held is True, name
    assert tools["deletePet"].input_schema["x-scout-openapi"]["path"] == "/pets/{petId}/archive"
    assert ToolPolicy.objects.get(tool=tools["listPets"]).held is False


@pytest.mark.parametrize(
    "text, expected",
    [
        ("{not json: [", "malformed OpenAPI document"),
        (json.dumps({"openapi": "3.0.3", "paths": {}}), "'info' is a required property"),
        (json.dumps({"swagger": "2.0", "info": {"title": "x", "version": "1"}, "paths": {}}), "Swagger"),
        (
            json.dumps({"openapi": "3.0.3", "info": {"title": "x", "version": "1"}, "paths": {"/a": {"get": {}}}}),
            "responses",
        ),
        # A list holding itself (the walk never ended: a web worker pinned by the admin's preview) and a 600-byte
        # alias bomb (10^9 items).
        ("openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\nx-loop: &a [*a]\n", "YAML aliases"),
        (
            "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\nx-bomb:\n  l0: &l0 [a, a, a, a, a, a, a, a]\n"
            + "".join(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 8)}]\n" for i in range(1, 10)),
            "YAML aliases",
        ),
    ],
)
def test_malformed_document_fails_the_run_and_keeps_the_catalog(service, make_server, text, expected):
    live, _ = service
    server = _server(make_server, live.url)
    server_sync(server_pk=server.pk)
    before = {tool.name: tool.definition_hash for tool in server.tools.live()}
    set_document(server, text)

    run = server_sync(server_pk=server.pk)
    assert run.status == SyncStatus.FAILED
    assert expected in run.error
    assert (run.added, run.changed, run.removed) == (0, 0, 0)
    assert {tool.name: tool.definition_hash for tool in server.tools.live()} == before
    server.refresh_from_db()
    assert server.status == "degraded" and expected in server.last_error


def test_first_sync_of_a_malformed_document_imports_nothing(service, make_server):
    live, _ = service
    server = _server(make_server, live.url, openapi_document="openapi: 3.1.0\ninfo: [")
    run = server_sync(server_pk=server.pk)
    assert run.status == SyncStatus.FAILED and "neither JSON nor YAML" in run.error
    assert not Tool.objects.filter(server=server).exists()


def test_document_fetched_by_url_under_the_egress_rules(service, make_server, settings):
    live, pets = service
    server = _server(make_server, live.url, openapi_document="", openapi_url=f"{live.url}/openapi.json")
    run = server_sync(server_pk=server.pk)
    assert run.status == SyncStatus.PARTIAL and run.added == 10
    assert [r.raw_path for r in pets.requests] == ["/openapi.json"]

    pets.requests.clear()
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["localhost"]  # a name is not its loopback address
    refused = server_sync(server_pk=server.pk)
    assert refused.status == SyncStatus.FAILED
    assert "document URL refused: host 127.0.0.1 is not in SCOUT_UPSTREAM_ALLOWED_HOSTS" in refused.error
    assert pets.requests == []
    assert server.tools.live().count() == 10


def test_a_document_sent_a_little_at_a_time_is_cut_at_the_timeout(service, make_server, settings):
    """httpx's timeout bounds each read, not the whole: a service answering a piece just before each read timed out
    held the sync (a worker, or the admin's test connection) for as long as it liked. The timeout is the whole
    fetch's."""
    live, pets = service
    settings.SCOUT_UPSTREAM_LIST_TIMEOUT = 1.0  # each piece comes in 0.1 s; all 30 in about 3 s
    server = _server(make_server, live.url, openapi_document="", openapi_url=f"{live.url}/drip.json")
    run = server_sync(server_pk=server.pk)
    assert run.status == SyncStatus.FAILED and "timed out fetching the document" in run.error
    assert not Tool.objects.filter(server=server).exists()


def test_a_compressed_document_is_bounded_by_what_it_decompresses_to(service, make_server, settings):
    """T13: httpx decompressed each received chunk whole before the size check saw it, so some 64 kB of a gzip bomb
    became some 64 MB in memory, however low the document bound. The body is now decompressed as it arrives, never
    past the bound; a document sent gzip-compressed within it is read as before."""
    live, pets = service
    settings.SCOUT_OPENAPI_MAX_DOCUMENT_BYTES = 1024 * 1024
    server = _server(make_server, live.url, openapi_document="", openapi_url=f"{live.url}/gzipped.json")
    assert server_sync(server_pk=server.pk).added == 10
    assert pets.requests[-1].headers["accept-encoding"] == "gzip, deflate"

    Server.objects.filter(pk=server.pk).update(openapi_url=f"{live.url}/bomb.json")
    gzip_bomb()  # compressed before memory is measured
    tracemalloc.start()
    try:
        run = server_sync(server_pk=server.pk)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert run.status == SyncStatus.FAILED and "the document is larger than 1048576 bytes" in run.error
    assert peak < 16 * 1024 * 1024, f"{peak} bytes at the peak for a 1 MB bound"


def test_document_url_redirect_is_not_followed(service, make_server):
    live, pets = service
    pets.redirect_to = f"{live.url}/openapi.json"
    server = _server(make_server, live.url, openapi_document="", openapi_url=f"{live.url}/moved")
    run = server_sync(server_pk=server.pk)
    assert run.status == SyncStatus.FAILED and "redirects are not followed" in run.error
    assert [r.raw_path for r in pets.requests] == ["/moved"]


def test_remote_ref_is_refused_without_fetching_it(service, make_server):
    live, pets = service
    doc = document()
    doc["components"]["schemas"]["Owner"] = {"$ref": f"{live.url}/openapi.json#/components/schemas/Owner"}
    server = _server(make_server, live.url, doc)
    run = server_sync(server_pk=server.pk)
    assert run.status == SyncStatus.FAILED and "remote $ref" in run.error and "bundle" in run.error
    assert pets.requests == []


def test_yaml_document_and_openapi_31(service, make_server):
    import yaml

    live, _ = service
    doc = document()
    doc["openapi"] = "3.1.0"
    doc["components"]["schemas"]["Owner"]["properties"]["name"] = {"type": ["string", "null"]}
    server = _server(make_server, live.url, openapi_document=yaml.safe_dump(doc))
    run = server_sync(server_pk=server.pk)
    assert run.status == SyncStatus.PARTIAL, run.error
    owner = server.tools.get(name="put_pets_petId_owner").input_schema
    assert owner["properties"]["name"] == {"type": ["string", "null"]}
    # In 3.1 "nullable" is not a keyword; 3.0's mapping is not applied.
    assert server.tools.get(name="createPet").input_schema["properties"]["tag"] == {"type": "string"}


def test_server_validation_needs_base_url_and_credential_names(db):
    from django.core.exceptions import ValidationError

    server = Server(slug="p", name="P", transport=Transport.OPENAPI, openapi_url="https://api.example.com/o.json")
    with pytest.raises(ValidationError, match="base URL"):
        server.full_clean()
    server.base_url = "https://api.example.com"
    server.openapi_credentials = [{"type": "bearer", "env": "A-B"}]
    with pytest.raises(ValidationError, match="not an environment variable name"):
        server.full_clean()
    server.openapi_credentials = [{"type": "bearer", "env": "PETS_TOKEN", "value": "s3cret"}]
    with pytest.raises(ValidationError, match="needs exactly the keys"):
        server.full_clean()
    server.openapi_credentials = [{"type": "api_key", "in": "body", "name": "k", "env": "K"}]
    with pytest.raises(ValidationError, match="'in' must be one of"):
        server.full_clean()
    server.openapi_credentials = CREDENTIALS
    server.full_clean()


def test_a_large_stored_document_is_not_loaded_with_each_tool(service, make_server):
    """Tools joined to their server (search, governance, admin) must not drag the document along: with
    GitHub's 13 MB document on the server row, indexing 1.2k tools loaded 1.2k copies (out of memory)."""
    live, _ = service
    big = document()
    big["info"]["description"] = "A very long introduction. " * 20_000
    server = _server(make_server, live.url, big)
    assert server_sync(server_pk=server.pk).status == SyncStatus.PARTIAL
    for tool in Tool.objects.select_related("server").filter(server=server):
        assert max(len(str(value)) for value in vars(tool.server).values()) < 10_000


def test_a_document_whose_headers_come_a_little_at_a_time_is_cut_at_the_timeout(service, make_server, settings):
    """The whole fetch's timeout was checked between pieces of the document only: a service sending its status line
    and then one byte of its headers just before each read timed out held the sync (a worker, or the admin's
    preview and test connection: a web thread) for as long as it liked. The timeout covers the headers too."""
    from tests.drip_server import dripping

    settings.SCOUT_UPSTREAM_LIST_TIMEOUT = 0.5
    with dripping(where="headers", interval=0.1, pieces=60) as (url, finished):  # about 6 s in all
        server = _server(make_server, url, openapi_document="", openapi_url=f"{url}/openapi.json")
        run = server_sync(server_pk=server.pk)
        assert finished == []  # the service was still sending when the sync gave up on it
    assert run.status == SyncStatus.FAILED and "timed out fetching the document" in run.error


def test_a_document_of_more_operations_than_the_tool_cap_fails_without_changes(service, make_server, settings):
    """T13: SCOUT_UPSTREAM_MAX_TOOLS bounded an MCP server's tools/list only; an OpenAPI document of more operations
    was imported whole. It now fails its sync the same way and the server keeps its tools."""
    from catalog.openapi import openapi_operations

    live, _ = service
    operations = openapi_operations(document())
    settings.SCOUT_UPSTREAM_MAX_TOOLS = len(operations.tools) + len(operations.rejections)
    server = _server(make_server, live.url)
    assert server_sync(server_pk=server.pk).status != SyncStatus.FAILED
    before = {tool.name: tool.definition_hash for tool in server.tools.live()}

    more = document()
    more["paths"]["/extra"] = {"get": {"operationId": "extra", "responses": {"200": {"description": "ok"}}}}
    set_document(server, json.dumps(more))
    run = server_sync(server_pk=server.pk)
    assert run.status == SyncStatus.FAILED, run.error
    assert f"listed more than {settings.SCOUT_UPSTREAM_MAX_TOOLS} tools (SCOUT_UPSTREAM_MAX_TOOLS)" in run.error
    assert {tool.name: tool.definition_hash for tool in server.tools.live()} == before


def test_a_document_quoting_the_services_credentials_never_stores_or_shows_them(service, make_server):
    """T1/T14: Scout sends the service's credentials with the fetch of its document (same origin), and a service may
    write them back into it (a "try it" example filled in with the caller's key, a parameter's default). A tool's
    text is stored, indexed and served to every caller who may discover it, a refused operation is shown with the
    run: neither may carry a value Scout gave the service."""
    from catalog.models import SyncRun
    from catalog.services.sync import server_openapi_preview

    live, pets = service
    token, key = "sync-test-token", "sync-test-key"
    quoting = document()
    list_pets = quoting["paths"]["/pets"]["get"]
    list_pets["description"] = f"Try it: curl -H 'Authorization: Bearer {token}' '{live.url}/pets?api_key={key}'"
    list_pets["parameters"][1]["schema"]["default"] = key
    list_pets["parameters"][1]["schema"]["enum"].append(key)
    quoting["paths"]["/pets/{petId}/photo"]["post"]["operationId"] = f"uploadPhoto_{key}"  # refused: multipart
    deep: list = [key]
    for _ in range(700):  # an extension nested deeper than the call stack left to a walk that recursed
        deep = [deep]
    quoting["x-deep"] = deep
    pets.served_document = quoting
    server = _server(make_server, live.url, openapi_document="", openapi_url=f"{live.url}/openapi.json")

    run = server_sync(server_pk=server.pk)
    definitions, rejections = server_openapi_preview(server=server)

    assert run.status == SyncStatus.PARTIAL, run.error
    assert pets.requests[0].headers["authorization"] == f"Bearer {token}"  # the service had them to quote
    tool = Tool.objects.get(server=server, name="listPets")
    assert tool.description.startswith("Try it: curl -H 'Authorization: Bearer [redacted]'")
    assert tool.input_schema["properties"]["status"]["default"] == "[redacted]"
    assert {r["name"] for r in SyncRun.objects.get(pk=run.pk).rejections} == {"uploadPhoto__redacted", "subscribe"}
    stored = json.dumps(
        [list(Tool.objects.values()), list(ToolRevision.objects.values()), list(SyncRun.objects.values())],
        default=str,
    )
    shown = json.dumps([[d.__dict__ for d in definitions], rejections], default=str)
    for secret in (token, key):
        assert secret not in stored
        assert secret not in shown


def test_deprecating_an_operation_flags_its_tool_without_changing_its_definition(service, make_server):
    """``deprecated: true`` is a fact beside the definition (``Tool.upstream_deprecated``), not words put into the
    upstream's description: the hash stays, so no revision and no review, and search re-reads the tool."""
    from governance.models import ToolPolicy

    live, _ = service
    server = _server(make_server, live.url)
    assert server_sync(server_pk=server.pk).status == SyncStatus.PARTIAL
    ToolPolicy.objects.filter(tool__server=server).update(held=False)  # a curator accepted the first import
    before = _tools(server)["showPetById"]

    deprecated = document()
    deprecated["paths"]["/pets/{petId}"]["get"]["deprecated"] = True
    set_document(server, json.dumps(deprecated))
    run = server_sync(server_pk=server.pk)
    # The definition is the one accepted: the run counts it unchanged, as its list of revisions written shows it.
    assert (run.changed, run.added, run.removed, run.unchanged) == (0, 0, 0, len(_tools(server))), run.error
    after = _tools(server)["showPetById"]
    assert after.upstream_deprecated and after.deprecated
    assert (after.description, after.definition_hash) == (before.description, before.definition_hash)
    assert ToolRevision.objects.filter(tool=after).count() == 1
    assert ToolPolicy.objects.get(tool=after).held is False
    assert not _tools(server)["listPets"].deprecated

    set_document(server, json.dumps(document()))  # no longer deprecated: the flag goes as it came
    assert server_sync(server_pk=server.pk).changed == 0
    assert not _tools(server)["showPetById"].upstream_deprecated


def test_an_operation_id_that_reads_as_another_name_is_refused_and_the_run_says_why(service, make_server):
    """redteam44: an operationId was never name-checked: one wholly in Cyrillic that reads "copy", or mixing scripts,
    was cleaned into another name (``get_copy``, ``howPetById``) without a word in the run; it is now refused with
    the reason sync gives an MCP tool's name, and the service's other operations are imported."""
    live, _ = service
    doc = document()
    ok = {"summary": "Copy", "responses": {"200": {"description": "ok"}}}
    doc["paths"]["/copy"] = {"get": {**ok, "operationId": "\u0441\u043e\u0440\u0443"}}  # Cyrillic "сору"
    doc["paths"]["/show"] = {"get": {**ok, "operationId": "\u0455howPetById"}}  # a Cyrillic "ѕ"
    server = _server(make_server, live.url, doc)

    run = server_sync(server_pk=server.pk)
    reasons = {rejection["name"]: rejection["reason"] for rejection in run.rejections}
    assert reasons["get_copy"] == (
        "GET /copy: tool name '\\u0441\\u043e\\u0440\\u0443' is written in CYRILLIC letters that each read as a "
        "Latin one ('copy'), so it can read as another name"
    )
    assert "mixes letters of the scripts CYRILLIC, LATIN" in reasons["howPetById"]
    tools = _tools(server)
    assert "get_copy" not in tools and "howPetById" not in tools
    assert {"listPets", "showPetById", "createPet"} <= set(tools)
