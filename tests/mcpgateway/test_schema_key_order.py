"""A tool's schemas keep the order its upstream gave their keys in (schema12): a JSONField, jsonb on Postgres, kept an
object's keys shorter first, so tool_inspect listed a tool's parameters in another order than its author chose (the
order a model reads them in), and its search document read differently than on SQLite for the same definition, so
the two databases encoded other vectors (perf14: 3,556 of 10,000 tools). Over HTTP against the live gateway and a
real (scripted) stdio upstream, on either database."""

from __future__ import annotations

import pytest

from catalog.models import Tool, ToolRevision
from catalog.services.sync import server_sync
from search.selectors import tool_docs_load
from tests.catalog.servers.fixtures import good_tool

from .conftest import build_index, gateway_db, mcp_client, run, scripted_read_tool

pytestmark = [gateway_db, pytest.mark.slow]

# Written in an order jsonb does not keep: it lists type, required, properties; id, limit, zeta_query; id, total.
INPUT = {
    "type": "object",
    "properties": {
        "zeta_query": {"type": "string", "description": "What to look up"},
        "limit": {"type": "integer", "description": "How many records at most"},
        "id": {"type": "string", "description": "One record's id"},
    },
    "required": ["zeta_query"],
}
OUTPUT = {"type": "object", "properties": {"total": {"type": "integer"}, "id": {"type": "string"}}}
ANNOTATIONS = {"readOnlyHint": True, "title": "Look up records"}
UPSTREAM_ORDER = ["zeta_query", "limit", "id"]

# The same bytes on SQLite and Postgres: the parameters in the upstream's order.
DOCUMENT = (
    "lookup (lookup) on lab\n"
    "The lookup tool.\n"
    "Parameters: zeta_query (string, required): What to look up; limit (integer, optional): How many records at most; "
    "id (string, optional): One record's id"
)


def _lookup(tmp_path, member_on, admin_user) -> str:
    tool = good_tool("lookup", inputSchema=INPUT, outputSchema=OUTPUT, annotations=ANNOTATIONS)
    reply = {"content": [{"type": "text", "text": "found"}], "structuredContent": {"total": 0, "id": "r-1"}}
    token, _ = scripted_read_tool(tmp_path, "lab", tool, reply, member_on=member_on, admin_user=admin_user)
    return token


def _document_text() -> str:
    (doc,) = tool_docs_load(pks=[Tool.objects.get(tool_id="lab::lookup").pk])
    return doc.document_text()


def test_inspect_and_the_document_keep_the_upstreams_order(gateway, member_on, admin_user, tmp_path):
    token = _lookup(tmp_path, member_on, admin_user)
    build_index()

    async def main():
        async with mcp_client(gateway, token) as client:
            return await client.call_tool("tool_inspect", {"tool_ids": ["lab::lookup"]})

    (inspected,) = run(main).structured_content["tools"]
    assert list(inspected["inputSchema"]) == ["type", "properties", "required"]
    assert list(inspected["inputSchema"]["properties"]) == UPSTREAM_ORDER
    assert list(inspected["outputSchema"]["properties"]) == ["total", "id"]
    assert _document_text() == DOCUMENT


def test_a_row_that_lost_its_order_gets_it_back_at_the_next_sync(gateway, member_on, admin_user, tmp_path):
    """A Postgres row from before catalog 0011 holds jsonb's order: the server's next sync writes the upstream's
    again, with no new revision (the definition is the same) and a search document that reads as on SQLite."""
    _lookup(tmp_path, member_on, admin_user)
    jsonb_order = {
        "type": "object",
        "required": ["zeta_query"],
        "properties": {name: INPUT["properties"][name] for name in ["id", "limit", "zeta_query"]},
    }
    tool = Tool.objects.get(tool_id="lab::lookup")
    Tool.objects.filter(pk=tool.pk).update(input_schema=jsonb_order, annotations=dict(reversed(ANNOTATIONS.items())))
    ToolRevision.objects.filter(tool=tool).update(definition={**tool.upstream_definition(), "inputSchema": jsonb_order})
    assert _document_text() != DOCUMENT

    sync_run = server_sync(server_pk=tool.server_id, trigger="test")

    assert (sync_run.status, sync_run.changed, sync_run.unchanged) == ("success", 0, 1)
    tool.refresh_from_db()
    assert list(tool.input_schema["properties"]) == UPSTREAM_ORDER and list(tool.input_schema)[-1] == "required"
    assert list(tool.annotations) == ["readOnlyHint", "title"]
    (revision,) = ToolRevision.objects.filter(tool=tool)
    assert list(revision.definition["inputSchema"]["properties"]) == UPSTREAM_ORDER
    assert _document_text() == DOCUMENT
