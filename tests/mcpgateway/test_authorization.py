"""Authorization over HTTP with outsider, member and approver personas (SECURITY-TESTS Z1, Z4, Z8; C1 11)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from mcpgateway.constants import UNKNOWN_TOOL_GUIDANCE, UNKNOWN_TOOL_MESSAGE

from .conftest import (
    MODERN,
    PROTOCOL_MODES,
    build_index,
    gateway_db,
    grant,
    make_token,
    make_user,
    mcp_client,
    modern_request,
    raw_post,
    rpc_result,
    run,
    unknown_tool_text,
)

pytestmark = [gateway_db, pytest.mark.slow]
HIDDEN = "calc::rotate_payroll_encryption_keys"
QUERY = "rotate the payroll encryption keys"


@pytest.fixture
def people(member_on, admin_user, time_server, calc_server) -> dict[str, Any]:
    from catalog.models import Tool

    member, token = member_on(time_server, Tool.objects.get(tool_id="calc::add"))
    approver, outsider = make_user("gw_approver"), make_user("gw_outsider")
    grant(admin_user, calc_server, approver, "discover", "execute", "approve")
    build_index()
    return {
        "member": token,
        "approver": make_token(approver),
        "outsider": make_token(outsider),
        "member_discover_only": make_token(member, scopes=["discover"]),
        "member_time_only": make_token(member, scopes=["discover", "execute", "server:time"]),
    }


async def _search(client, query: str, top_k: int = 10) -> list[str]:
    result = await client.call_tool("tool_search", {"query": query, "top_k": top_k})
    return [match["tool_id"] for match in result.structured_content["matches"]]


def test_the_hidden_tool_is_the_best_match_for_those_who_may_see_it(gateway, people):
    async def main():
        async with mcp_client(gateway, people["approver"]) as client:
            return await _search(client, QUERY)

    assert run(main)[0] == HIDDEN


@pytest.mark.parametrize("mode", PROTOCOL_MODES)
def test_member_never_sees_inspects_or_executes_the_hidden_tool(gateway, people, mode):
    async def main():
        async with mcp_client(gateway, people["member"], mode=mode) as client:
            found = await _search(client, QUERY, top_k=20)
            errors = [
                await client.call_tool(name, args)
                for name, args in (
                    ("tool_inspect", {"tool_ids": [HIDDEN]}),
                    ("execute_tool", {"tool_id": HIDDEN, "arguments": {"environment": "prod"}}),
                )
            ]
            return found, errors

    found, errors = run(main)
    assert HIDDEN not in found
    assert all(tool_id.startswith(("time::", "calc::add")) for tool_id in found)
    for error in errors:
        assert unknown_tool_text(error) == UNKNOWN_TOOL_MESSAGE


def _execute_bytes(gateway, token: str, tool_id: str) -> tuple[int, bytes, dict[str, str]]:
    body = modern_request("tools/call", {"name": "execute_tool", "arguments": {"tool_id": tool_id, "arguments": {}}})
    response = raw_post(gateway, body, token=token)
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("date",)}
    return response.status_code, response.content, headers


def _inspect_bytes(gateway, token: str, tool_id: str) -> tuple[int, bytes]:
    body = modern_request("tools/call", {"name": "tool_inspect", "arguments": {"tool_ids": [tool_id]}})
    response = raw_post(gateway, body, token=token)
    return response.status_code, response.content


VARIANTS = [
    "calc::Rotate_payroll_encryption_keys",  # case change
    "calc::rotate_payroll_encryptіon_keys",  # Cyrillic і homoglyph
    HIDDEN + "\x00",
    HIDDEN + "\r\nX-Injected: 1",
    "\u202e" + HIDDEN,  # right-to-left mark
    HIDDEN + " ",
    "calc::" + "r" * 10_000,
]


def test_hidden_and_its_variants_answer_exactly_like_a_nonexistent_tool(gateway, people):
    nonexistent = _execute_bytes(gateway, people["member"], "calc::no_such_tool")
    # A tool error the model reads (isError in a result), not a JSON-RPC error: HTTP 200.
    assert nonexistent[0] == 200 and UNKNOWN_TOOL_MESSAGE.encode() in nonexistent[1]
    assert b'"isError":true' in nonexistent[1] and b'"error"' not in nonexistent[1]
    inspect_nonexistent = _inspect_bytes(gateway, people["member"], "calc::no_such_tool")
    assert _execute_bytes(gateway, people["member"], HIDDEN) == nonexistent
    assert _inspect_bytes(gateway, people["member"], HIDDEN) == inspect_nonexistent
    for variant in VARIANTS:
        assert _execute_bytes(gateway, people["member"], variant) == nonexistent, repr(variant[:40])
        assert _inspect_bytes(gateway, people["member"], variant) == inspect_nonexistent, repr(variant[:40])
        assert variant.encode() not in nonexistent[1]


def _inspect_many(gateway, token: str, tool_ids: list[str]) -> tuple[int, bytes, str]:
    """tool_inspect of several ids, some unknown: the known ones' definitions come back, the unknown ones are named
    in the last text block. Returns the status, the body and that block's text."""
    body = modern_request("tools/call", {"name": "tool_inspect", "arguments": {"tool_ids": tool_ids}})
    response = raw_post(gateway, body, token=token)
    result = rpc_result(response)["result"]
    found = [tool["tool_id"] for tool in result["structuredContent"]["tools"]]
    assert not result["isError"] and result["structuredContent"]["unknown_tool"] is True
    assert found == [tool_id for tool_id in tool_ids if tool_id in ("time::convert_time", "calc::add")]
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]["tools"]
    return response.status_code, response.content, result["content"][-1]["text"]


def test_inspect_of_several_ids_names_the_unknown_ones_and_a_hidden_one_exactly_as_if_it_did_not_exist(gateway, people):
    from catalog.models import Tool

    asked = ["time::convert_time", HIDDEN, "calc::no_such_tool", "calc::add"]
    status, body, message = _inspect_many(gateway, people["member"], asked)
    assert status == 200  # the known ones' definitions, and the unknown ones named (a tool error for one id)
    assert message == (
        'Unknown tool: tool_ids[1] "calc::rotate_payroll_encryption_keys"; tool_ids[2] "calc::no_such_tool". '
        + UNKNOWN_TOOL_GUIDANCE
    )
    # Now the hidden tool does not exist at all: the member's answer is the same, byte for byte.
    Tool.objects.filter(tool_id=HIDDEN).delete()
    assert _inspect_many(gateway, people["member"], asked) == (status, body, message)
    # An id is the caller's own text, shown escaped and cut: no raw control or direction marks, no 10,000 chars.
    _, _, message = _inspect_many(gateway, people["member"], ["calc::add", "\u202e" + "calc::" + "r" * 10_000])
    assert message.startswith('Unknown tool: tool_ids[1] "\\u202ecalc::rrr') and "\u202e" not in message
    assert len(message) < 120 + len(UNKNOWN_TOOL_GUIDANCE)  # the id cut, not 10,000 characters


def test_outsider_sees_and_runs_nothing(gateway, people):
    async def main():
        async with mcp_client(gateway, people["outsider"], mode=MODERN) as client:
            listing = [tool.name for tool in (await client.list_tools()).tools]
            found = await _search(client, "current time")
            refused = await client.call_tool("execute_tool", {"tool_id": "time::get_current_time", "arguments": {}})
            return listing, found, refused

    listing, found, refused = run(main)
    assert set(listing) == {"tool_search", "tool_inspect", "execute_tool"}
    assert found == []
    assert unknown_tool_text(refused) == UNKNOWN_TOOL_MESSAGE


def test_token_scopes_narrow_what_is_seen_and_run(gateway, people):
    async def main():
        async with mcp_client(gateway, people["member_time_only"]) as client:
            time_only = await _search(client, "add two integers", top_k=20)
        async with mcp_client(gateway, people["member_discover_only"]) as client:
            seen = await _search(client, "current time")
            refused = await client.call_tool("execute_tool", {"tool_id": "time::get_current_time", "arguments": {}})
            unknown = await client.call_tool("execute_tool", {"tool_id": "calc::no_such_tool", "arguments": {}})
        async with mcp_client(gateway, people["member"]) as client:
            full = await _search(client, "add two integers", top_k=20)
        return time_only, seen, refused, unknown, full

    time_only, seen, refused, unknown, full = run(main)
    assert "calc::add" in full
    assert all(tool_id.startswith("time::") for tool_id in time_only)
    assert "time::get_current_time" in seen  # discover scope: searchable...
    # ...but not executable without the execute scope, and told so, not "unknown tool" for the tool_id it was given;
    # the answer is about the token, so a tool it may not see is answered the same (Z4).
    assert refused.is_error and refused.structured_content == {"execute_scope_missing": True}
    assert "lacks the execute scope" in refused.content[0].text
    assert unknown.model_dump() == refused.model_dump()


def test_revocation_takes_effect_on_the_next_call(gateway, people, admin_user, time_server):
    from django.contrib.auth import get_user_model

    from governance.services.permissions import permission_revoke

    async def call():
        async with mcp_client(gateway, people["member"]) as client:
            return await _search(client, "current time")

    assert "time::get_current_time" in run(call)
    member = get_user_model().objects.get(username="gw_member")
    permission_revoke(actor=admin_user, target=time_server, action="discover", holder=member)
    assert not any(tool_id.startswith("time::") for tool_id in run(call))


def test_executing_an_unknown_or_hidden_tool_writes_one_identical_denied_audit_event(gateway, people):
    from governance.models import AuditEvent

    def denied_events() -> list[tuple[str, str, str, dict]]:
        return [
            (event.outcome, event.tool_ref, event.human_subject, event.payload)
            for event in AuditEvent.objects.filter(event_type="execution").order_by("pk")
        ]

    assert denied_events() == []
    _execute_bytes(gateway, people["member"], "calc::no_such_tool")
    unknown = denied_events()
    assert len(unknown) == 1
    outcome, tool_ref, subject, payload = unknown[0]
    assert (outcome, subject) == ("denied", "gw_member") and payload["meta_tool"] == "execute_tool"
    assert "no_such_tool" not in tool_ref + str(payload)  # the asked-for id is never recorded
    _execute_bytes(gateway, people["member"], HIDDEN)
    both = denied_events()
    assert len(both) == 2 and both[1] == both[0]  # a hidden tool's event looks exactly like an unknown one's


# A granted tool whose server is archived (or Degraded) is said to be unavailable to its grantee, and only to them
# (agentux18): test_server_not_serving.py.
@pytest.mark.parametrize("retired", ["tool removed", "tool disabled", "tool held"])
def test_a_retired_tool_the_caller_was_granted_answers_exactly_like_a_nonexistent_one(gateway, people, retired):
    from django.utils import timezone

    from catalog.models import Tool

    granted = "calc::add"
    assert not _execute_bytes(gateway, people["member"], granted)[1].count(UNKNOWN_TOOL_MESSAGE.encode())
    tool = Tool.objects.get(tool_id=granted)
    if retired == "tool removed":
        Tool.objects.filter(pk=tool.pk).update(removed_at=timezone.now())
    elif retired == "tool disabled":
        Tool.objects.filter(pk=tool.pk).update(enabled=False)
    else:
        type(tool.policy).objects.filter(pk=tool.policy.pk).update(held=True)
    assert _execute_bytes(gateway, people["member"], granted) == _execute_bytes(
        gateway, people["member"], "calc::no_such_tool"
    )
    assert _inspect_bytes(gateway, people["member"], granted) == _inspect_bytes(
        gateway, people["member"], "calc::no_such_tool"
    )


def _call_with_escapes(gateway, token: str, meta_tool: str, arguments: str) -> tuple[int, bytes]:
    """A tools/call whose ``arguments`` are sent as written (JSON escapes kept: json.dumps would refuse them)."""
    meta = json.dumps(modern_request("tools/list")["params"]["_meta"])
    params = f'{{"name":"{meta_tool}","arguments":{arguments},"_meta":{meta}}}'
    raw = f'{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{params}}}'
    response = raw_post(
        gateway, None, token=token, raw=raw.encode(), headers={"Mcp-Method": "tools/call", "Mcp-Name": meta_tool}
    )
    return response.status_code, response.content


def test_a_tool_id_with_a_lone_surrogate_is_a_parse_error_audited_alike_for_hidden_and_unknown(gateway, people):
    """A ``\\ud800`` escape decodes to no character: the tool lookup failed encoding it (a traceback per call, the
    SDK's "Error executing tool", no audit event). Refused with the body's other parse errors, the same for a
    hidden and an unknown id; a surrogate pair (an emoji) is one character and still served."""
    from governance.choices import AuditEventType
    from governance.models import AuditEvent

    answers = set()
    for tool_id in (HIDDEN, "calc::no_such_tool"):
        for meta_tool, arguments in (
            ("execute_tool", f'{{"tool_id":"{tool_id}\\ud800","arguments":{{}}}}'),
            ("tool_inspect", f'{{"tool_ids":["\\udfff{tool_id}"]}}'),
            ("execute_tool", f'{{"tool_id":"{tool_id}","arguments":{{"environment":"\\ud800"}}}}'),
        ):
            status, body = _call_with_escapes(gateway, people["member"], meta_tool, arguments)
            answers.add((status, body))
    message = "Parse error: a string holds a lone surrogate (not a Unicode character)"
    refusal = {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": message}}
    assert answers == {(400, json.dumps(refusal).encode())}
    assert AuditEvent.objects.filter(event_type=AuditEventType.REQUEST_REJECTED).count() == 6
    status, body = _call_with_escapes(
        gateway, people["member"], "tool_search", '{"query":"\\ud83d\\ude00 current time"}'
    )
    assert status == 200 and json.loads(body)["result"]["isError"] is False
