"""The demo's curation (``manage.py demo``'s purposes and example requests) claims only what its tools do.

server-memory keeps a knowledge graph of entities, their observations and relations: no notes, no files. A curated
example "recall earlier notes on a project" made "read the meeting notes file" a high-confidence answer for
memory::search_nodes beside server-filesystem's read_text_file (bench/NOTES-agentux12.md). The listings are those of
server-memory 2026.8.31 and server-filesystem 2026.8.31 (tests/mcpgateway/servers/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from catalog.models import Tool, ToolExample
from mcpgateway.management.commands.demo import Command
from search.services import index_rebuild, tool_search
from tests.governance.factories import ServerFactory, ToolFactory
from tests.search.conftest import clean_search_state, encoder  # noqa: F401 - the real model; index state reset

pytestmark = [pytest.mark.django_db, pytest.mark.slow]
SERVERS = Path(__file__).parent / "servers"
EARLIER_EXAMPLE = "recall earlier notes on a project"  # what the demo curated before


def _listed(slug: str, listing: str) -> None:
    server = ServerFactory(slug=slug)
    for tool in json.loads((SERVERS / listing).read_text()):
        ToolFactory(
            server=server,
            name=tool["name"],
            upstream_title=tool.get("title", ""),
            description=tool["description"],
            input_schema=tool["inputSchema"],
            annotations=tool.get("annotations"),
        )


@pytest.fixture
def curated_demo(encoder, django_capture_on_commit_callbacks) -> list[int]:  # noqa: F811 - the fixture
    """The demo's memory server and a filesystem server, curated as the demo curates (over a database an earlier
    version of the demo curated), indexed: every tool's pk."""
    _listed("memory", "memory_tools.json")
    _listed("filesystem", "filesystem_tools.json")
    ToolExample.objects.create(tool=Tool.objects.get(tool_id="memory::search_nodes"), text=EARLIER_EXAMPLE)
    Command()._curate()
    with django_capture_on_commit_callbacks(execute=True):
        index_rebuild()
    return list(Tool.objects.values_list("pk", flat=True))


def _answer(query: str, visible: list[int]) -> tuple[str, list[str]]:
    result = tool_search(query=query, visible=visible, top_k=5)
    return result.confidence.value, [match.tool_id for match in result.matches]


def test_a_request_for_a_file_is_not_answered_by_the_memory_tools(curated_demo):
    confidence, found = _answer("read the meeting notes file", curated_demo)
    assert found[0] == "filesystem::read_text_file", (confidence, found)
    assert not ToolExample.objects.filter(text=EARLIER_EXAMPLE).exists()


def test_the_demo_requests_still_find_their_memory_tools(curated_demo):
    for query, tool_id in (
        ("remember that alice works at acme", "memory::create_entities"),
        ("what do you remember about alice", "memory::search_nodes"),
    ):
        confidence, found = _answer(query, curated_demo)
        assert (confidence, found[0]) == ("high", tool_id), (query, found)


def test_a_fact_about_someone_is_remembered_with_confidence(curated_demo):
    """ "remember that Bob likes coffee" shared only "remember" with the curated examples: served low (no schemas,
    a tool_inspect turn more) although create_entities fits. A curated example of what someone likes lifts it."""
    confidence, found = _answer("remember that Bob likes coffee", curated_demo)
    assert (confidence, found[0]) == ("high", "memory::create_entities"), found
