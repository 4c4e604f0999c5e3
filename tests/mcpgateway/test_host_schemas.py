"""The meta-tools as hosts convert them, over HTTP: their schemas in the JSON Schema subset every host's function
calling takes (Gemini's OpenAPI subset had no anyOf, $ref or type lists, and types every node), and every
answer's structuredContent valid against the declared outputSchema, its text saying the same."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest

from mcpgateway.services.discovery import LOW_CONFIDENCE, NO_TOOL_FITS

from .conftest import LEGACY, PROTOCOL_MODES, gateway_db, mcp_client, run
from .test_agent_view import listed, text_of

pytestmark = [gateway_db, pytest.mark.slow]
# "default": OpenAI strict function calling on Azure refuses a tool declaring one ("'default' is not permitted").
NOT_PORTABLE = ("anyOf", "oneOf", "allOf", "not", "$ref", "$defs", "default")


@pytest.fixture
def token(gateway, member_on, time_server, calc_server, faulty_server) -> str:
    from catalog.models import Tool

    return member_on(time_server, Tool.objects.get(tool_id="calc::add"), faulty_server, index=True).token


def not_portable(schema: dict[str, Any], where: str = "") -> list[str]:
    """Where ``schema`` leaves the subset every host takes: a union or reference keyword, a list of types, or a
    node (an enum too) without its one type."""
    problems = [f"{where}.{key}" for key in NOT_PORTABLE if key in schema]
    if not isinstance(schema.get("type"), str):
        problems.append(f"{where}: type {schema.get('type')!r}")
    for name, spec in (schema.get("properties") or {}).items():
        problems += not_portable(spec, f"{where}.{name}")
    if isinstance(schema.get("items"), dict):
        problems += not_portable(schema["items"], f"{where}[]")
    return problems


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_meta_tool_schemas_are_in_the_subset_every_host_takes(gateway, token, mode):
    tools = listed(gateway, token, mode)
    for name, tool in tools.items():
        assert not_portable(tool.input_schema) == [], name
        assert not_portable(tool.output_schema or {"type": "object"}) == [], name
    # Nothing meant was lost: the same parameters, the same required ones, the same choices, calls still closed.
    search = tools["tool_search"].input_schema
    assert list(search["properties"]) == ["query", "top_k", "operation_class", "environment", "scope"]
    assert search["required"] == ["query"] and search["additionalProperties"] is False
    assert search["properties"]["operation_class"]["enum"] == ["read", "write", "execute", "approve"]
    assert "default 5" in search["properties"]["top_k"]["description"]
    assert search["properties"]["scope"]["description"].startswith("all (default)")
    execute = tools["execute_tool"].input_schema
    assert list(execute["properties"]) == ["tool_id", "arguments", "approval_id", "idempotency_key"]
    assert execute["required"] == ["tool_id"]
    assert execute["properties"]["arguments"]["type"] == "object"
    assert execute["properties"]["arguments"]["additionalProperties"] is True
    assert tools["tool_search"].output_schema["properties"]["confidence"]["enum"] == ["high", "low", "none"]


def test_null_for_an_unused_optional_argument_is_still_taken(gateway, token):
    """OpenAI strict hosts make every parameter required and send null for the ones not used."""

    async def main():
        async with mcp_client(gateway, token) as client:
            query = {"query": "convert 3pm Paris time to New York"}
            nulls = {"operation_class": None, "environment": None}
            plain = await client.call_tool("tool_search", query)
            with_nulls = await client.call_tool("tool_search", {**query, **nulls})
            call = {"tool_id": "calc::add", "arguments": {"a": 2, "b": 3}}
            ran = await client.call_tool("execute_tool", {**call, "approval_id": None, "idempotency_key": None})
            return plain, with_nulls, ran

    plain, with_nulls, ran = run(main)
    assert not with_nulls.is_error and with_nulls.structured_content == plain.structured_content
    assert not ran.is_error and text_of(ran) == "5", text_of(ran)


def test_an_empty_string_for_an_unused_optional_argument_means_omitted(gateway, token):
    """OpenAI strict hosts send every parameter, and a string one the model has no value for as "" (the listed types
    are not nullable, for Gemini). An empty approval_id was looked up as an approval and an empty idempotency_key
    refused, so every execute_tool call from such a host failed and "call again without approval_id" could not be
    followed; both now mean omitted, as an empty environment already did."""

    async def main():
        async with mcp_client(gateway, token) as client:
            query = {"query": "convert 3pm Paris time to New York"}
            plain = await client.call_tool("tool_search", query)
            empty = await client.call_tool("tool_search", {**query, "environment": ""})
            blanks = {"approval_id": "", "idempotency_key": ""}
            ran = await client.call_tool(
                "execute_tool", {"tool_id": "calc::add", "arguments": {"a": 2, "b": 3}, **blanks}
            )
            held = await client.call_tool(
                "execute_tool", {"tool_id": "faulty::record_note", "arguments": {"note": "ship it"}, **blanks}
            )
            return plain, empty, ran, held

    plain, empty, ran, held = run(main)
    assert not empty.is_error and empty.structured_content == plain.structured_content
    assert not ran.is_error and text_of(ran) == "5", text_of(ran)
    assert held.is_error and held.structured_content["approval_required"] is True, text_of(held)


def test_every_answer_matches_its_output_schema_and_its_text(gateway, token):
    tools = listed(gateway, token, LEGACY)
    assert tools["execute_tool"].output_schema is None  # its result is the called tool's

    async def main():
        async with mcp_client(gateway, token) as client:
            search = {
                "high": {"query": "convert 3pm Paris time to New York"},
                "low": {"query": "calculate the total of my invoices"},
                "withheld": {"query": "play some jazz music", "operation_class": "approve"},
                "capped": {"query": "convert 3pm Paris time to New York", "top_k": 99},
                "invalid": {"query": "convert time", "scope": "everything"},
            }
            inspect = {
                "ok": {"tool_ids": ["calc::add"]},
                "unknown": {"tool_ids": ["calc::ad"]},
                "some_unknown": {"tool_ids": ["calc::add", "nope::none"]},
            }
            execute = {
                "ok": {"tool_id": "calc::add", "arguments": {"a": 2, "b": 3}},
                "invalid_args": {"tool_id": "calc::add", "arguments": {"a": "two"}},
                "approval": {"tool_id": "faulty::record_note", "arguments": {"note": "ship it"}},
                "did_you_mean": {"tool_id": "calc::ad", "arguments": {"a": 2, "b": 3}},
            }
            answers = {}
            for name, kinds in (("tool_search", search), ("tool_inspect", inspect), ("execute_tool", execute)):
                for kind, arguments in kinds.items():
                    answers[name, kind] = await client.call_tool(name, arguments)
            return answers

    answers = run(main)
    for (name, kind), answer in answers.items():
        schema = tools[name].output_schema
        if schema is not None and answer.structured_content is not None:
            jsonschema.Draft202012Validator(schema).validate(answer.structured_content)
        if not answer.is_error:
            assert schema is None or answer.structured_content is not None, (name, kind)

    high, low, withheld = (answers["tool_search", kind].structured_content for kind in ("high", "low", "withheld"))
    assert (high["confidence"], low["confidence"], withheld["confidence"]) == ("high", "low", "none")
    for found in (high, low):
        text = text_of(answers["tool_search", found["confidence"]])
        assert all(match["tool_id"] in text for match in found["matches"])
    assert LOW_CONFIDENCE in text_of(answers["tool_search", "low"])
    assert withheld["abstained"] is True and withheld["matches"] == []
    assert text_of(answers["tool_search", "withheld"]).startswith(NO_TOOL_FITS.split(".")[0])
    capped = answers["tool_search", "capped"]
    assert capped.structured_content["notes"] and all(
        note in text_of(capped) for note in capped.structured_content["notes"]
    )
    invalid = answers["tool_search", "invalid"]
    assert invalid.is_error and "scope must be one of: all, my_servers" in text_of(invalid), text_of(invalid)

    inspected = answers["tool_inspect", "ok"].structured_content["tools"]
    assert json.loads(text_of(answers["tool_inspect", "ok"])) == inspected
    assert answers["tool_inspect", "unknown"].structured_content == {
        "unknown_tool": True,
        "did_you_mean": ["calc::add"],
    }
    assert "Did you mean calc::add?" in text_of(answers["tool_inspect", "unknown"])
    partly = answers["tool_inspect", "some_unknown"]
    assert [tool["tool_id"] for tool in partly.structured_content["tools"]] == ["calc::add"]
    assert json.loads(partly.content[0].text) == partly.structured_content["tools"]
    assert '"nope::none"' in partly.content[1].text

    assert not answers["execute_tool", "ok"].is_error and text_of(answers["execute_tool", "ok"]) == "5"
    invalid = answers["execute_tool", "invalid_args"]
    assert invalid.structured_content == {"invalid_arguments": True}
    assert text_of(invalid).startswith(
        "Invalid arguments: arguments: missing required property b; arguments.a: must be of type integer."
    ), text_of(invalid)
    approval = answers["execute_tool", "approval"]
    assert approval.is_error and approval.structured_content["approval_required"] is True
    assert approval.structured_content["approval_id"] in text_of(approval)
    assert approval.structured_content["approval_url"] in text_of(approval)
    meant = answers["execute_tool", "did_you_mean"]
    assert meant.structured_content == {"unknown_tool": True, "did_you_mean": ["calc::add"]}
    assert "Did you mean calc::add?" in text_of(meant)
