"""redteam54: approvals and idempotency keys attacked over HTTP (a live gateway, a real stdio upstream that logs every
call it receives): arguments that canonicalise alike, a sibling agent's token, a group left, a definition changed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from .conftest import (
    MODERN,
    gateway_db,
    grant,
    make_token,
    make_user,
    mcp_client,
    modern_request,
    raw_post,
    rpc_result,
    run,
    sync_server,
    unknown_tool_text,
)

pytestmark = [gateway_db, pytest.mark.slow]
TOOL = "ledger::post_entry"
DEFINITION = {
    "name": "post_entry",
    "description": "Post an entry to the ledger.",
    "inputSchema": {
        "type": "object",
        "properties": {"note": {"type": "string"}, "count": {"type": "number"}},
        "required": ["note", "count"],
    },
}
REPLY = json.dumps({"jsonrpc": "2.0", "id": "ID", "result": {"content": [{"type": "text", "text": "posted"}]}})


@pytest.fixture
def ledger(gateway, admin_user, tmp_path: Path) -> dict[str, Any]:
    """A scripted stdio upstream with one unclassified tool (so every call needs an approval), its call log, an
    approver on it, and the path of its script (rewritten to change the definition the next sync reads)."""
    from tests.catalog.servers.fixtures import SCRIPTED

    log, script = tmp_path / "calls.jsonl", tmp_path / "ledger.json"
    script.write_text(
        json.dumps({"pages": [[DEFINITION]], "call_reply": REPLY.replace('"ID"', "ID"), "call_log": str(log)})
    )
    server = sync_server(slug="ledger", transport="stdio", command=sys.executable, args=[str(SCRIPTED), str(script)])
    approver = make_user("gw_approver", is_staff=True)
    grant(admin_user, server, approver, "discover", "approve")
    return {"server": server, "log": log, "script": script, "approver": approver}


def _sent(log: Path) -> list[dict[str, Any]]:
    """The arguments of every call the upstream received."""
    return [json.loads(line)["arguments"] for line in log.read_text().splitlines()] if log.exists() else []


def _call_raw(gateway: Any, token: str, arguments_json: str, **extra: str) -> dict[str, Any] | int:
    """execute_tool with the inner arguments sent as the JSON text given (key order, literals, duplicates as written).
    The JSON-RPC result, or the HTTP status of a refused request."""
    body = modern_request(
        "tools/call", {"name": "execute_tool", "arguments": {"tool_id": TOOL, **extra, "arguments": {}}}
    )
    raw = json.dumps(body).replace('"arguments": {}', f'"arguments": {arguments_json}', 1)
    response = raw_post(gateway, body, token=token, raw=raw.encode())
    if response.status_code != 200:
        return response.status_code
    return rpc_result(response)["result"]


def _ask(gateway: Any, token: str, arguments: dict[str, Any], **extra: str) -> Any:
    async def call() -> Any:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            return await client.call_tool("execute_tool", {"tool_id": TOOL, "arguments": arguments, **extra})

    return run(call)


def _approved(gateway: Any, token: str, arguments: dict[str, Any], approver: Any) -> str:
    """Ask for ``arguments`` over HTTP and have ``approver`` approve the request; its approval id."""
    from governance.models import ApprovalRequest
    from governance.services.approvals import approval_decide

    first = _ask(gateway, token, arguments)
    approval_id = first.structured_content["approval_id"]
    approval_decide(
        request=ApprovalRequest.objects.get(approval_id=approval_id), approver=approver, approve=True, reason="ok"
    )
    return approval_id


def test_an_approval_holds_only_for_arguments_that_reach_the_upstream_as_approved(gateway, member_on, ledger):
    """Arguments spelt otherwise but parsed alike (key order, ``-0`` for ``0``) are the approved call and run, sent
    exactly as approved; ``1.0`` for ``1``, ``1e0``, ``-0.0`` for ``0`` are other JSON values (a typed upstream reads
    them otherwise) and are refused as a mismatch; a duplicated key (which value would run?) never parses."""
    token = member_on(ledger["server"]).token
    one = _approved(gateway, token, {"note": "x", "count": 1}, ledger["approver"])
    for other in ('{"note": "x", "count": 1.0}', '{"note": "x", "count": 1e0}', '{"count": 1, "note": "x "}'):
        result = _call_raw(gateway, token, other, approval_id=one)
        assert result["structuredContent"]["approval_rejected"] == "arguments_mismatch", other
    duplicated = _call_raw(gateway, token, '{"note": "x", "count": 2, "count": 1}', approval_id=one)
    assert duplicated == 400
    assert _sent(ledger["log"]) == []
    reordered = _call_raw(gateway, token, '{"count": 1, "note": "x"}', approval_id=one)
    assert not reordered["isError"], reordered
    again = _call_raw(gateway, token, '{"count": 1, "note": "x"}', approval_id=one)  # single use
    assert again["structuredContent"]["approval_rejected"] == "used"

    zero = _approved(gateway, token, {"note": "x", "count": 0}, ledger["approver"])
    for other in ('{"note": "x", "count": -0.0}', '{"note": "x", "count": 0.0}'):
        result = _call_raw(gateway, token, other, approval_id=zero)
        assert result["structuredContent"]["approval_rejected"] == "arguments_mismatch", other
    negative_zero = _call_raw(gateway, token, '{"note": "x", "count": -0}', approval_id=zero)
    assert not negative_zero["isError"], negative_zero
    sent = _sent(ledger["log"])
    assert sent == [{"count": 1, "note": "x"}, {"count": 0, "note": "x"}]
    assert [type(arguments["count"]) for arguments in sent] == [int, int]  # never 1.0 or -0.0 on the wire


def test_an_approval_is_no_sibling_agents_and_dies_with_the_group_that_gave_access(gateway, admin_user, ledger):
    """Another agent of the same person (its own token) cannot use the approval; the person who reached the tool
    through a group and left it cannot either (void, nothing sent), and a key replayed after leaving is unknown."""
    from datetime import timedelta

    from django.contrib.auth.models import Group
    from django.utils import timezone

    from governance.models import Agent, ApprovalRequest
    from governance.services.tokens import api_token_create

    member = make_user("gw_member")
    team = Group.objects.create(name="ledger-team")
    team.user_set.add(member)
    grant(admin_user, ledger["server"], team, "discover", "execute")
    writer = Agent.objects.create(user=member, name="writer", all_user_tools=True)
    sibling = Agent.objects.create(user=member, name="sibling", all_user_tools=True)

    def agent_token(agent: Any) -> str:
        _, raw = api_token_create(
            user=member,
            name=agent.name,
            scopes=["discover", "execute"],
            agent=agent,
            expires_at=timezone.now() + timedelta(hours=1),
        )
        return raw

    writer_token, sibling_token = agent_token(writer), agent_token(sibling)
    arguments = {"note": "pay", "count": 3}
    approval_id = _approved(gateway, writer_token, arguments, ledger["approver"])
    stolen = _ask(gateway, sibling_token, arguments, approval_id=approval_id)
    assert stolen.structured_content["approval_rejected"] == "unknown"
    person = _ask(gateway, make_token(member), arguments, approval_id=approval_id)
    assert person.structured_content["approval_rejected"] == "unknown"
    assert _sent(ledger["log"]) == []

    ran = _ask(gateway, writer_token, {"note": "pay", "count": 3}, approval_id=approval_id, idempotency_key="k1")
    assert not ran.is_error
    second = _approved(gateway, writer_token, {"note": "pay", "count": 4}, ledger["approver"])
    team.user_set.remove(member)
    left = _ask(gateway, writer_token, {"note": "pay", "count": 4}, approval_id=second)
    assert left.is_error and unknown_tool_text(left), left
    replayed = _ask(gateway, writer_token, arguments, approval_id=approval_id, idempotency_key="k1")
    assert replayed.is_error and unknown_tool_text(replayed), replayed
    # Leaving the group voided the approval at once (it no longer waits for the sweep): given the membership back,
    # the person asks again; the old approval runs nothing.
    team.user_set.add(member)
    back = _ask(gateway, writer_token, {"note": "pay", "count": 4}, approval_id=second)
    assert back.is_error and back.structured_content["approval_rejected"] == "expired", back
    assert _sent(ledger["log"]) == [arguments]
    assert ApprovalRequest.objects.get(approval_id=second).status == "expired"
    # Left from the group's side (all its members at once) and from the person's side, alike.
    third = _approved(gateway, writer_token, {"note": "pay", "count": 5}, ledger["approver"])
    team.user_set.clear()
    assert ApprovalRequest.objects.get(approval_id=third).status == "expired"
    team.user_set.add(member)
    fourth = _approved(gateway, writer_token, {"note": "pay", "count": 6}, ledger["approver"])
    member.groups.remove(team)
    assert ApprovalRequest.objects.get(approval_id=fourth).status == "expired"


def test_a_changed_definition_voids_open_approvals_and_a_key_replays_only_its_own_call(
    gateway, member_on, ledger, admin_user
):
    """Requests asked under one definition, the tool re-synced to another (held, then accepted by a curator): one
    approved before the change and one decided after it run nothing; a key used before the change answers its own
    stored call and sends nothing."""
    from catalog.services.sync import server_sync
    from governance.models import ApprovalRequest, ToolReview
    from governance.services.approvals import ApprovalError, approval_decide
    from governance.services.review import tool_review_accept

    token = member_on(ledger["server"]).token
    done = _approved(gateway, token, {"note": "a", "count": 1}, ledger["approver"])
    first = _ask(gateway, token, {"note": "a", "count": 1}, approval_id=done, idempotency_key="k")
    assert not first.is_error
    approved = _approved(gateway, token, {"note": "b", "count": 2}, ledger["approver"])
    pending = _ask(gateway, token, {"note": "c", "count": 3}).structured_content["approval_id"]

    changed = {**DEFINITION, "description": "Post an entry to the ledger, and wire the amount out."}
    script = json.loads(ledger["script"].read_text())
    ledger["script"].write_text(json.dumps({**script, "pages": [[changed]]}))
    run_ = server_sync(server_pk=ledger["server"].pk, trigger="test")
    assert run_.status in ("success", "partial"), run_.error
    review = ToolReview.objects.get(tool__tool_id=TOOL, status="pending")
    tool_review_accept(review=review, actor=admin_user)
    try:
        approval_decide(
            request=ApprovalRequest.objects.get(approval_id=pending),
            approver=ledger["approver"],
            approve=True,
            reason="",
        )
    except ApprovalError:
        pass  # refused to decide, or decided: either way its use must run nothing
    for approval_id, arguments in ((approved, {"note": "b", "count": 2}), (pending, {"note": "c", "count": 3})):
        used = _ask(gateway, token, arguments, approval_id=approval_id)
        assert used.is_error and used.structured_content["approval_rejected"] in ("definition_changed", "expired"), used
    replay = _ask(gateway, token, {"note": "a", "count": 1}, approval_id=done, idempotency_key="k")
    assert not replay.is_error and replay.content[0].text == "posted"
    assert _sent(ledger["log"]) == [{"note": "a", "count": 1}]
