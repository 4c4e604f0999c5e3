"""A tool name that reads as another (redteam41, T4/T8/T6): an upstream names its tools as it likes, and sync refused
only control characters and "::" in a name, so a server listed ``reаd_file`` (a Cyrillic "а") beside its real
``read_file``, or a name with a line separator, and both were served. Over a real (scripted) stdio upstream, synced
and called over HTTP."""

from __future__ import annotations

import json

import pytest

from tests.catalog.servers.fixtures import good_tool

from .conftest import gateway_db, grant, make_token, make_user, mcp_client, run, sync_scripted_server

pytestmark = [gateway_db, pytest.mark.slow]

REPLY = '{"jsonrpc": "2.0", "id": ID, "result": {"content": [{"type": "text", "text": "read"}]}}'
LOOK_ALIKES = [
    "re\u0430d_file",  # a Cyrillic "а"
    "read\u2028file",  # a line separator
    "read_file\u2029",  # a paragraph separator
    "\uff52ead_file",  # a full-width "ｒ"
    "read\u00a0file",  # a no-break space
    "rea\u200bd_file",  # a zero-width space
    "\u0391\u0392_file",  # Greek capitals that read as Latin "AB"
]
KEPT = ["read_file", "読む_file", "ファイルを読む", "café_lookup", "ὅμοιος"]


def _synced_refusing(gateway, admin_user, tmp_path, kept, look_alikes, *, looked: str, real: str) -> dict[str, str]:
    """A real stdio upstream listing ``kept`` and ``look_alikes`` synced: only ``kept`` stored, each look-alike
    refused with its name escaped; over HTTP ``looked`` (a refused name) is an unknown tool and ``real`` runs, the
    only call the upstream gets. The run's reasons, by name."""
    log = tmp_path / "calls.jsonl"
    tools = [good_tool(name, annotations={"readOnlyHint": True}) for name in [*kept, *look_alikes]]
    server = sync_scripted_server(tmp_path, "files", {"pages": [tools], "call_log": str(log), "call_reply": REPLY})
    assert sorted(server.tools.values_list("name", flat=True)) == sorted(kept)
    run_ = server.sync_runs.order_by("-pk").first()
    assert run_.status == "partial" and run_.rejected == len(look_alikes)
    for rejection in run_.rejections:
        assert rejection["reason"].startswith(f"tool name {ascii(rejection['name'])} "), rejection  # escaped
    caller = make_user("gw_caller")
    grant(admin_user, server, caller, "discover", "execute")
    token = make_token(caller)

    async def main():
        async with mcp_client(gateway, token) as client:
            refused = await client.call_tool("execute_tool", {"tool_id": f"files::{looked}", "arguments": {}})
            served = await client.call_tool("execute_tool", {"tool_id": f"files::{real}", "arguments": {}})
            return refused, served

    refused, served = run(main)
    assert refused.is_error and refused.structured_content["unknown_tool"] is True
    assert not served.is_error, served
    assert [json.loads(line)["name"] for line in log.read_text().splitlines()] == [real]
    return {rejection["name"]: rejection["reason"] for rejection in run_.rejections}


def test_a_name_that_reads_as_another_is_refused_at_sync_and_never_served(gateway, admin_user, tmp_path):
    _synced_refusing(gateway, admin_user, tmp_path, KEPT, LOOK_ALIKES, looked="re\u0430d_file", real="read_file")


# Wholly in one other script, every letter reading as a Latin one (redteam44): "сору" (Cyrillic) beside "copy".
WHOLE_SCRIPT_LOOK_ALIKES = ["\u0441\u043e\u0440\u0443", "\u0455\u0441\u043e\u0440\u0435_2", "\u0391\u0392\u0395"]
OTHER_SCRIPTS_KEPT = [
    "copy",
    "\u041f\u0440\u0438\u0432\u0435\u0442",
    "\u0441\u043e\u043e\u0431\u0449\u0435\u043d\u0438\u0435",
    "\u03b1\u03b2\u03b3",
]


def test_a_name_wholly_in_another_script_that_reads_as_latin_is_refused_at_sync(gateway, admin_user, tmp_path):
    reasons = _synced_refusing(
        gateway,
        admin_user,
        tmp_path,
        OTHER_SCRIPTS_KEPT,
        WHOLE_SCRIPT_LOOK_ALIKES,
        looked="\u0441\u043e\u0440\u0443",
        real="copy",
    )
    assert reasons["\u0441\u043e\u0440\u0443"] == (
        "tool name '\\u0441\\u043e\\u0440\\u0443' is written in CYRILLIC letters that each read as a Latin one "
        "('copy'), so it can read as another name"
    )


# Characters that show nothing, or punctuation that reads as ASCII's (redteam45): each beside the real "read-file".
INVISIBLE_LOOK_ALIKES = [
    "read-fi\u034fle",  # COMBINING GRAPHEME JOINER (a mark, not a format character)
    "read-file\ufe0f",  # a variation selector
    "read-file\U000e0100",  # a supplementary variation selector
    "read-file\u115f",  # a Hangul filler (a letter of a script Latin may be written with)
    "read-file\u17b4",  # a Khmer inherent vowel
    "read-file\u180b",  # a Mongolian variation selector
    "read-file\u2800",  # the blank Braille pattern
    "read\u2010file",  # a Unicode hyphen for "-"
]
MARKS_KEPT = ["read-file", "\u0939\u093f\u0928\u094d\u0926\u0940_\u092a\u0922\u093c\u094b", "caf\u00e9_lookup"]


def test_a_name_with_a_character_that_shows_nothing_is_refused_at_sync(gateway, admin_user, tmp_path):
    reasons = _synced_refusing(
        gateway, admin_user, tmp_path, MARKS_KEPT, INVISIBLE_LOOK_ALIKES, looked="read-fi\u034fle", real="read-file"
    )
    assert (
        reasons["read-fi\u034fle"]
        == "tool name 'read-fi\\u034fle' contains the invisible or separator character U+034F"
    )
    assert reasons["read\u2010file"] == (
        "tool name 'read\\u2010file' contains U+2010, which reads as '-', so it can read as another name"
    )
