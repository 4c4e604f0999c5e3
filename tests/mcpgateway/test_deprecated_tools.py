"""A tool its upstream marks deprecated does not outrank its replacement, over HTTP against the live gateway.

server-filesystem lists ``read_file`` ("Read File (Deprecated)", "... DEPRECATED: Use read_text_file instead.")
beside ``read_text_file``. The old tool's shorter name and text matched "read the meeting notes file" better, so an
agent was offered first the tool the upstream asks it not to use. Its listing (tests/mcpgateway/servers/
filesystem_tools.json, as server-filesystem 2026.8.31 lists it) is served by a real (scripted) stdio upstream.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from .conftest import (
    PROTOCOL_MODES,
    build_index,
    gateway_db,
    grant,
    make_token,
    make_user,
    mcp_client,
    run,
    sync_scripted_server,
)

pytestmark = [gateway_db, pytest.mark.slow]

LISTING = json.loads((Path(__file__).parent / "servers" / "filesystem_tools.json").read_text())
# Requests an agent sends to read a file; without the demotion read_file came first for each.
READ_REQUESTS = ["read the meeting notes file", "open the file and print it"]


@pytest.fixture
def files(gateway, admin_user, tmp_path) -> dict[str, str]:
    """Tokens of a caller who may use every filesystem tool and of one who may use only the deprecated one."""
    from catalog.models import Tool

    server = sync_scripted_server(tmp_path, "filesystem", {"pages": [LISTING]})
    everything, old_only = make_user("gw_files"), make_user("gw_old_only")
    grant(admin_user, server, everything, "discover", "execute")
    grant(admin_user, Tool.objects.get(tool_id="filesystem::read_file"), old_only, "discover", "execute")
    build_index()
    return {"everything": make_token(everything), "old_only": make_token(old_only)}


def searched(gateway, token: str, mode: str, queries: list[str]) -> list[Any]:
    async def main() -> list[Any]:
        async with mcp_client(gateway, token, mode=mode) as client:
            return [await client.call_tool("tool_search", {"query": query}) for query in queries]

    return run(main)


def ids(result: Any) -> list[str]:
    return [match["tool_id"] for match in result.structured_content["matches"]]


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_a_deprecated_tool_ranks_below_its_replacement(gateway, files, mode):
    for query, result in zip(READ_REQUESTS, searched(gateway, files["everything"], mode, READ_REQUESTS), strict=True):
        found = ids(result)
        assert "filesystem::read_file" in found, (query, found)  # still offered, below the tool to use
        assert found.index("filesystem::read_text_file") < found.index("filesystem::read_file"), (query, found)
        assert found[0] == "filesystem::read_text_file", (query, found)


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_a_deprecated_tool_is_said_to_be_deprecated(gateway, files, mode):
    """Its line's summary, a first sentence, leaves out "DEPRECATED: Use read_text_file instead.": the line and the
    match say it, and only for the marked tool; tool_inspect too."""

    async def main() -> tuple[Any, Any]:
        async with mcp_client(gateway, files["everything"], mode=mode) as client:
            found = await client.call_tool("tool_search", {"query": "read a text file"})
            ids = ["filesystem::read_file", "filesystem::read_text_file"]
            return found, await client.call_tool("tool_inspect", {"tool_ids": ids})

    found, inspected = run(main)
    lines = {line.split(" ")[1]: line for line in found.content[0].text.splitlines() if line[:1].isdigit()}
    assert lines["filesystem::read_file"].endswith("[risk low, read, deprecated]")
    assert lines["filesystem::read_text_file"].endswith("[risk low, read]")
    by_id = {match["tool_id"]: match for match in found.structured_content["matches"]}
    assert (
        by_id["filesystem::read_file"]["deprecated"] is True and "deprecated" not in by_id["filesystem::read_text_file"]
    )
    old, new = inspected.structured_content["tools"]
    assert old["deprecated"] is True and "deprecated" not in new


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_a_deprecated_tool_is_still_first_when_nothing_else_fits(gateway, files, mode):
    (result,) = searched(gateway, files["old_only"], mode, ["read a text file"])
    assert ids(result) == ["filesystem::read_file"]
