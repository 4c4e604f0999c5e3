"""Operations to tools, ORM-free: names, parameter merging, bodies, dialect mapping and what is refused."""

from __future__ import annotations

from typing import Any

import pytest

from catalog.openapi.document import BINDING_KEY, fallback_name, openapi_document_parse, openapi_operations, tool_name

OK = {"200": {"description": "ok"}}
PATH_ID = {"parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}]}


def doc(paths: dict[str, Any], *, version: str = "3.0.3", schemas: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "openapi": version,
        "info": {"title": "t", "version": "1"},
        "paths": paths,
        "components": {"schemas": schemas or {}},
    }


def only_tool(document: dict[str, Any]) -> dict[str, Any]:
    listing = openapi_operations(document)
    assert listing.rejections == [], listing.rejections
    [tool] = listing.tools
    return tool


@pytest.mark.parametrize(
    "operation_id, method, path, expected",
    [
        ("repos/list-for-org", "get", "/orgs/{org}/repos", "repos_list-for-org"),
        ("listPets", "get", "/pets", "listPets"),
        (None, "get", "/pets/{petId}", "get_pets_petId"),
        ("   ", "delete", "/a/b.json", "delete_a_b_json"),
        (None, "get", "/", "get"),
    ],
)
def test_tool_names(operation_id, method, path, expected):
    operation = {"operationId": operation_id} if operation_id is not None else {}
    assert tool_name(operation, method, path) == expected
    assert fallback_name(method, path) == fallback_name(method, path)  # stable across syncs


def test_operation_parameters_override_path_parameters_and_reserved_headers_are_skipped():
    tool = only_tool(
        doc(
            {
                "/items/{id}": {
                    "parameters": [{"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}],
                    "get": {
                        "parameters": [
                            {"name": "id", "in": "path", "required": True, "schema": {"type": "integer"}},
                            {"name": "Accept", "in": "header", "schema": {"type": "string"}},
                            {"name": "session", "in": "cookie", "schema": {"type": "string"}},
                            {"name": "ids", "in": "query", "explode": False, "schema": {"type": "array"}},
                        ],
                        "responses": OK,
                    },
                }
            }
        )
    )
    schema = tool["inputSchema"]
    assert schema["properties"]["id"] == {"type": "integer"}
    assert "Accept" not in schema["properties"]
    binding = schema["x-scout-openapi"]
    assert binding["parameters"] == [
        {"name": "id", "in": "path", "explode": False},
        {"name": "session", "in": "cookie", "explode": True},
        {"name": "ids", "in": "query", "explode": False},
    ]


def test_non_object_body_goes_under_body_and_3_0_exclusive_bounds_are_mapped():
    tool = only_tool(
        doc(
            {
                "/scores": {
                    "put": {
                        "requestBody": {
                            "required": True,
                            "content": {
                                "application/merge-patch+json": {
                                    "schema": {
                                        "type": "array",
                                        "items": {"type": "number", "minimum": 0, "exclusiveMinimum": True},
                                    }
                                }
                            },
                        },
                        "responses": OK,
                    }
                }
            }
        )
    )
    schema = tool["inputSchema"]
    assert schema["required"] == ["body"]
    assert schema["properties"]["body"]["items"] == {"type": "number", "exclusiveMinimum": 0}
    assert schema["x-scout-openapi"]["body"] == {
        "mode": "property",
        "property": "body",
        "contentType": "application/merge-patch+json",
    }


def test_31_sibling_keywords_refine_a_ref_and_deep_chains_are_cut():
    schemas = {"Name": {"type": "string"}}
    for level in range(60):  # a chain of references deeper than anything real
        schemas[f"L{level}"] = {
            "type": "object",
            "properties": {"next": {"$ref": f"#/components/schemas/L{level + 1}"}},
        }
    schemas["L60"] = {"type": "string"}
    body_schema = {
        "type": "object",
        "properties": {
            "name": {"$ref": "#/components/schemas/Name", "description": "Who"},
            "chain": {"$ref": "#/components/schemas/L0"},
        },
    }
    tool = only_tool(
        doc(
            {
                "/x": {
                    "post": {
                        "requestBody": {"content": {"application/json": {"schema": body_schema}}},
                        "responses": OK,
                    }
                }
            },
            version="3.1.0",
            schemas=schemas,
        )
    )
    props = tool["inputSchema"]["properties"]
    assert props["name"] == {"type": "string", "description": "Who"}
    node, depth = props["chain"], 0
    while "properties" in node:
        node, depth = node["properties"]["next"], depth + 1
    assert node["x-scout-cycle"] == "depth" and depth < 60


def test_a_schema_nested_too_deep_once_its_references_are_expanded_refuses_its_operation_only():
    """Twenty components, each nested 40 levels around a reference to the next: expanding them recursed until
    RecursionError, which failed the whole document's sync. Now that operation is refused and the others listed."""
    schemas: dict[str, Any] = {"S20": {"type": "string"}}
    for level in range(20):
        schema: dict[str, Any] = {"$ref": f"#/components/schemas/S{level + 1}"}
        for _ in range(40):
            schema = {"type": "object", "properties": {"a": schema}}
        schemas[f"S{level}"] = schema
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/S0"}}}}
    paths = {
        "/deep": {"post": {"operationId": "deep", "requestBody": body, "responses": OK}},
        "/flat": {"get": {"operationId": "flat", "responses": OK}},
    }
    listing = openapi_operations(doc(paths, schemas=schemas))
    assert [tool["name"] for tool in listing.tools] == ["flat"] and listing.names == {"deep", "flat"}
    assert listing.rejections == [
        {"name": "deep", "reason": "POST /deep: the schema nests more than 100 levels deep once its $refs are expanded"}
    ]


@pytest.mark.parametrize(
    "operation, reason",
    [
        (
            {"parameters": [{"name": "f", "in": "query", "schema": {"type": "object"}}]},
            "parameter 'f' (query) is an object",
        ),
        (
            {"parameters": [{"name": "f", "in": "query", "style": "deepObject", "schema": {"type": "string"}}]},
            "has style 'deepObject'",
        ),
        (
            {"parameters": [{"name": "f", "in": "query", "content": {"application/json": {"schema": {}}}}]},
            "uses 'content' instead of 'schema'",
        ),
        (
            {
                "parameters": [
                    {"name": "id", "in": "query", "schema": {"type": "string"}},
                    {"name": "id", "in": "header", "schema": {"type": "string"}},
                ]
            },
            "is used in two places",
        ),
        (
            {"requestBody": {"content": {"application/x-www-form-urlencoded": {"schema": {"type": "object"}}}}},
            "only JSON request bodies are supported",
        ),
        # A name the HTTP client cannot write (UnicodeEncodeError, or h11's refusal) failed every call (redteam46).
        (
            {"parameters": [{"name": "X-St\u00e4dt", "in": "header", "schema": {"type": "string"}}]},
            "is not a name a header can carry",
        ),
        (
            {"parameters": [{"name": "X-A: b", "in": "header", "schema": {"type": "string"}}]},
            "is not a name a header can carry",
        ),
        (
            {"parameters": [{"name": "theme;session", "in": "cookie", "schema": {"type": "string"}}]},
            "is not a name a cookie can carry",
        ),
    ],
)
def test_refused_operations_say_why(operation, reason):
    listing = openapi_operations(doc({"/r": {"post": {"operationId": "op", **operation, "responses": OK}}}))
    assert listing.tools == []
    [rejection] = listing.rejections
    assert rejection["name"] == "op" and rejection["reason"].startswith("POST /r: ") and reason in rejection["reason"]
    assert listing.names == {"op"}


def test_extension_keys_of_paths_are_not_operations():
    # The validator accepts any value under an ``x-`` key of ``paths``; it is not a path, and appended to a base
    # URL without one (``https://api.example.com`` + ``x-@other.host/``) it would name another host.
    listing = openapi_operations(
        doc({"/pets": {"get": {"operationId": "listPets", "responses": OK}}, "x-@evil.example/steal": {"get": {}}})
    )
    assert [tool["name"] for tool in listing.tools] == ["listPets"]
    assert listing.names == {"listPets"}


@pytest.mark.parametrize(
    "path",
    ["/../admin", "/%2e%2e/admin", "/%2E%2E/admin", "/%252e%252e/admin", "/pets/{id}/../../admin", "/./x", "/a\\..\\b"],
)
def test_a_path_with_a_dot_segment_is_refused(path):
    # Appended to a base URL with a path (https://api.example/v1), "/../admin" is /admin once normalized (httpx
    # does it before sending; a proxy does it after decoding %2e): the call left the base path with the credentials.
    listing = openapi_operations(doc({path: {"get": {"operationId": "climb", "responses": OK}}}))
    assert listing.tools == []
    [rejection] = listing.rejections
    assert rejection["name"] == "climb" and "'.' or '..' segment" in rejection["reason"]


def test_a_stored_binding_or_a_path_argument_with_a_dot_segment_builds_no_request():
    from catalog.models import Server
    from catalog.openapi.execute import build_request
    from catalog.upstream import UpstreamError

    server = Server(slug="api", name="api", transport="openapi", base_url="https://api.example/v1")
    [tool] = openapi_operations(doc({"/pets/{id}": {"get": {"operationId": "show", "responses": OK, **PATH_ID}}})).tools
    schema = tool["inputSchema"]
    assert build_request(server, schema, {"id": "a/b c"})["url"] == "https://api.example/v1/pets/a%2Fb%20c"
    for value in ("..", ".", "../admin", "..%2Fadmin", "%2e%2e", "%252E%252E", "..\\admin", "x/../../admin"):
        with pytest.raises(UpstreamError) as refused:
            build_request(server, schema, {"id": value})
        assert refused.value.kind == "config"  # nothing sent; the value is not echoed
        assert str(refused.value) == "api: path argument 'id' is or holds a '.' or '..' segment"
    # A binding stored by a sync from before the check (its path from the document, not an argument).
    older = {**schema, BINDING_KEY: {**schema[BINDING_KEY], "path": "/../admin/{id}"}}
    with pytest.raises(UpstreamError, match="does not stay on the base URL"):
        build_request(server, older, {"id": "1"})


def test_a_stored_binding_with_a_header_or_cookie_name_http_cannot_write_builds_no_request():
    """A header or cookie name sync now refuses (``test_refused_operations_say_why``), in a binding stored before:
    refused unsent, not the HTTP client's UnicodeEncodeError, which failed the call unaudited (redteam46)."""
    from catalog.models import Server
    from catalog.openapi.execute import build_request
    from catalog.upstream import UpstreamError

    server = Server(slug="api", name="api", transport="openapi", base_url="https://api.example/v1")
    [tool] = openapi_operations(doc({"/pets": {"get": {"operationId": "list", "responses": OK}}})).tools
    for place, name in (("header", "X-St\u00e4dt"), ("cookie", "theme;session")):
        binding = {**tool["inputSchema"][BINDING_KEY], "parameters": [{"name": name, "in": place}]}
        with pytest.raises(UpstreamError, match=f"a {place} parameter's name is no {place} name") as refused:
            build_request(server, {**tool["inputSchema"], BINDING_KEY: binding}, {name: "x"})
        assert refused.value.kind == "config"


YAML_HEAD = "openapi: 3.0.3\ninfo: {title: t, version: '1'}\npaths: {}\n"
YAML_LOOP = YAML_HEAD + "x-loop: &loop [*loop]\n"  # a list that holds itself: walking it never ends
YAML_BOMB = (
    YAML_HEAD
    + "x-bomb:\n  l0: &l0 [a, a, a, a, a, a, a, a, a, a]\n"
    + "".join(f"  l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 9))
)  # 10^9 items from 600 bytes: validating it took minutes per level more


@pytest.mark.parametrize("text", [YAML_LOOP, YAML_BOMB], ids=["loop", "bomb"])
def test_yaml_aliases_that_repeat_objects_are_refused_when_parsed(text):
    with pytest.raises(ValueError, match="YAML aliases"):
        openapi_document_parse(text)


def test_yaml_aliases_of_plain_values_are_kept():
    document = openapi_document_parse(YAML_HEAD + "x-a: &name pets\nx-b: *name\n")
    assert document["x-a"] == document["x-b"] == "pets"


@pytest.mark.parametrize("opening", ['{"openapi": "3.0.3", "x-deep": ', "openapi: 3.0.3\nx-deep: "])
def test_a_document_nested_thousands_deep_is_refused_as_malformed(opening):
    with pytest.raises(ValueError, match="nested too deeply"):  # was a RecursionError: a 500 in the admin preview
        openapi_document_parse(opening + "[" * 5000 + "]" * 5000 + ("}" if opening.startswith("{") else ""))
