"""Tenants (Z12) and per-agent grants (Z8) over HTTP against the live gateway, with the SDK client and raw
requests: tool_search, tool_inspect, execute_tool, the REST API, the approvals inbox and the audit trail.

alice acts in tenant A, bob in tenant B; one group holding every server contains both (a grant spanning
tenants), so only the tenant rule keeps them apart."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from mcpgateway.constants import UNKNOWN_TOOL_MESSAGE

from .conftest import (
    MODERN,
    build_index,
    faulty_calls,
    gateway_db,
    grant,
    make_token,
    make_user,
    mcp_client,
    modern_request,
    raw_post,
    run,
    sync_server,
    unknown_tool_text,
)

pytestmark = [gateway_db, pytest.mark.slow]
B_TOOL = "calc::rotate_payroll_encryption_keys"
QUERIES = ["rotate the payroll encryption keys", "add two integers", "current time in a time zone", "ping the server"]


def _tenant(slug: str, *members: Any) -> Any:
    from governance.models import Tenant

    tenant = Tenant.objects.create(slug=slug, name=slug.upper())
    tenant.members.add(*members)
    return tenant


@pytest.fixture
def tenants(gateway, admin_user, time_server, faulty_server) -> dict[str, Any]:
    from django.contrib.auth.models import Group

    alice, bob = make_user("gw_alice"), make_user("gw_bob")
    tenant_a, tenant_b = _tenant("tenant-a", alice), _tenant("tenant-b", bob)
    everyone = Group.objects.create(name="everyone")
    everyone.user_set.add(alice, bob)
    for server in (time_server, faulty_server):  # shared: no tenant
        grant(admin_user, server, everyone, "discover", "execute")
    build_index()
    return {
        "admin": admin_user,
        "group": everyone,
        "alice": alice,
        "bob": bob,
        "a": tenant_a,
        "b": tenant_b,
        "alice_token": make_token(alice, tenant=tenant_a),
        "bob_token": make_token(bob, tenant=tenant_b),
        "alice_api": make_token(alice, scopes=["api", "discover"], tenant=tenant_a),
    }


def add_tenant_b_server(world: dict[str, Any], http_upstream: Any) -> Any:
    """Tenant B's calc server, granted to the group alice is in; its payroll tool is B's top hit."""
    from governance.models import ServerTenant

    calc = sync_server(slug="calc", transport="http", url=f"{http_upstream.url}/mcp")
    ServerTenant.objects.create(server=calc, tenant=world["b"])
    grant(world["admin"], calc, world["group"], "discover", "execute")
    build_index()
    return calc


def _search_bytes(gateway, token: str, query: str) -> bytes:
    body = modern_request("tools/call", {"name": "tool_search", "arguments": {"query": query, "top_k": 10}})
    response = raw_post(gateway, body, token=token)
    assert response.status_code == 200
    return response.content


def _call_bytes(gateway, token: str, meta_tool: str, tool_id: str) -> tuple[int, bytes]:
    arguments = {"tool_ids": [tool_id]} if meta_tool == "tool_inspect" else {"tool_id": tool_id, "arguments": {}}
    response = raw_post(gateway, modern_request("tools/call", {"name": meta_tool, "arguments": arguments}), token=token)
    return response.status_code, response.content


def _rest(gateway, token: str, path: str, method: str = "GET", **kwargs: Any) -> httpx.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx.request(method, f"{gateway.url}/api/v1/{path}", headers=headers, timeout=60, **kwargs)


def _observed(gateway, world: dict[str, Any]) -> dict[str, Any]:
    """Everything alice (tenant A) can observe about tenant B's payroll tool, as bytes."""
    seen: dict[str, Any] = {q: _search_bytes(gateway, world["alice_token"], q) for q in QUERIES}
    for meta_tool in ("tool_inspect", "execute_tool"):
        seen[meta_tool] = _call_bytes(gateway, world["alice_token"], meta_tool, B_TOOL)
    for path in ("tools/", f"tools/{B_TOOL}/"):
        response = _rest(gateway, world["alice_api"], path)
        seen[path] = (response.status_code, response.content)
    for query in QUERIES[:2]:
        response = _rest(gateway, world["alice_api"], "search/", method="POST", json={"query": query, "top_k": 10})
        seen[f"rest search {query}"] = (response.status_code, response.content)
    statuses = {key: value[0] for key, value in seen.items() if isinstance(value, tuple)}
    assert (
        statuses
        == {
            "tool_inspect": 200,  # a tool error the model reads (isError), for an unknown and a hidden id alike
            "execute_tool": 200,
            "tools/": 200,
            f"tools/{B_TOOL}/": 404,
            **{f"rest search {query}": 200 for query in QUERIES[:2]},
        }
    )
    return seen


def test_adding_tenant_bs_top_hit_changes_no_byte_of_tenant_as_answers(gateway, tenants, http_upstream):
    before = _observed(gateway, tenants)
    assert before == _observed(gateway, tenants)  # answers are deterministic: a difference below is a leak
    add_tenant_b_server(tenants, http_upstream)

    async def bob_searches():
        async with mcp_client(gateway, tenants["bob_token"]) as client:
            result = await client.call_tool("tool_search", {"query": QUERIES[0], "top_k": 10})
            return [match["tool_id"] for match in result.structured_content["matches"]]

    assert run(bob_searches)[0] == B_TOOL  # the tool is the best match for those who may see it
    after = _observed(gateway, tenants)
    for key in before:
        assert after[key] == before[key], key  # ids, order, total, scores, errors: the same bytes
    assert B_TOOL.encode() not in b"".join(v if isinstance(v, bytes) else v[1] for v in after.values())


def test_tenant_bs_tool_answers_tenant_a_exactly_like_an_unknown_tool(gateway, tenants, http_upstream):
    add_tenant_b_server(tenants, http_upstream)
    for meta_tool in ("tool_inspect", "execute_tool"):
        unknown = _call_bytes(gateway, tenants["alice_token"], meta_tool, "calc::no_such_tool")
        assert unknown[0] == 200 and UNKNOWN_TOOL_MESSAGE.encode() in unknown[1] and b'"isError":true' in unknown[1]
        assert _call_bytes(gateway, tenants["alice_token"], meta_tool, B_TOOL) == unknown
        assert _call_bytes(gateway, tenants["bob_token"], meta_tool, B_TOOL)[1] != unknown[1]  # B may use it
    unknown_rest = _rest(gateway, tenants["alice_api"], "tools/calc::no_such_tool/")
    hidden_rest = _rest(gateway, tenants["alice_api"], f"tools/{B_TOOL}/")
    assert (hidden_rest.status_code, hidden_rest.content) == (unknown_rest.status_code, unknown_rest.content) and (
        hidden_rest.status_code == 404
    )


def test_client_meta_cannot_claim_another_tenant_agent_or_subject(gateway, tenants, http_upstream):
    """C1 26: identity comes from the verified token only; ``_meta`` naming tenant B changes nothing."""
    from governance.models import AuditEvent

    add_tenant_b_server(tenants, http_upstream)
    spoof = {
        "subject": "gw_bob",
        "humanSubject": "gw_bob",
        "tenant": "tenant-b",
        "tenantId": "tenant-b",
        "agent": "root",
        "agentId": "root",
        "delegationChain": ["user:gw_bob", "agent:root"],
    }

    async def main():
        async with mcp_client(gateway, tenants["alice_token"], mode=MODERN) as client:
            found = await client.session.call_tool("tool_search", {"query": QUERIES[0], "top_k": 10}, meta=spoof)
            hidden = await client.session.call_tool("execute_tool", {"tool_id": B_TOOL, "arguments": {}}, meta=spoof)
            ran = await client.session.call_tool(
                "execute_tool", {"tool_id": "time::get_current_time", "arguments": {"timezone": "UTC"}}, meta=spoof
            )
            return found, hidden, ran

    found, hidden, ran = run(main)
    assert B_TOOL not in [match["tool_id"] for match in found.structured_content["matches"]]
    assert unknown_tool_text(hidden) == UNKNOWN_TOOL_MESSAGE
    assert not ran.is_error
    event = AuditEvent.objects.get(event_type="execution", outcome="success")
    assert (event.human_subject, event.tenant, event.agent) == ("gw_alice", "tenant-a", "")
    assert event.tenant_scope_id == tenants["a"].pk
    assert event.delegation_chain == ["user:gw_alice", "scout-gateway"]


# --- approvals and audit ------------------------------------------------------------------------------------


def test_approvals_never_cross_tenants(gateway, tenants, faulty_server, faulty_call_log):
    """Both tenants ask to call the same shared mutating tool; each tenant's approver sees and decides only
    its own tenant's request, and the other's id answers exactly like an unknown one."""
    approvers = {}
    for label, tenant in (("a", tenants["a"]), ("b", tenants["b"])):
        person = make_user(f"gw_approver_{label}")
        tenant.members.add(person)
        grant(tenants["admin"], faulty_server, person, "approve")
        approvers[label] = make_token(person, scopes=["api", "approve"], tenant=tenant)

    async def ask(token: str) -> str:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            result = await client.call_tool(
                "execute_tool", {"tool_id": "faulty::record_note", "arguments": {"note": "x"}}
            )
            assert result.is_error and result.structured_content["approval_required"] is True
            return result.structured_content["approval_id"]

    from_a, from_b = run(lambda: ask(tenants["alice_token"])), run(lambda: ask(tenants["bob_token"]))
    inbox_a = _rest(gateway, approvers["a"], "approvals/?status=all").json()
    inbox_b = _rest(gateway, approvers["b"], "approvals/?status=all").json()
    assert [row["approval_id"] for row in inbox_a["results"]] == [from_a] and inbox_a["count"] == 1
    assert [row["approval_id"] for row in inbox_b["results"]] == [from_b] and inbox_b["count"] == 1
    assert inbox_a["results"][0]["tenant"] == "tenant-a"
    unknown = _rest(gateway, approvers["a"], "approvals/apr_" + "A" * 22 + "/")
    foreign = _rest(gateway, approvers["a"], f"approvals/{from_b}/")
    assert (foreign.status_code, foreign.content) == (unknown.status_code, unknown.content) == (404, unknown.content)
    refused = _rest(gateway, approvers["a"], f"approvals/{from_b}/approve/", method="POST", json={})
    assert refused.status_code == 404
    from governance.models import ApprovalRequest

    assert ApprovalRequest.objects.get(approval_id=from_b).status == "pending"
    assert _rest(gateway, approvers["b"], f"approvals/{from_b}/approve/", method="POST", json={}).status_code == 200
    assert faulty_calls(faulty_call_log, "record_note") == 0


def test_audit_listing_shows_a_tenant_only_its_own_and_shared_events(gateway, tenants, http_upstream):
    from governance.models import AuditEvent

    add_tenant_b_server(tenants, http_upstream)

    async def calls():
        async with mcp_client(gateway, tenants["alice_token"]) as client:
            await client.call_tool(
                "execute_tool", {"tool_id": "time::get_current_time", "arguments": {"timezone": "UTC"}}
            )
        async with mcp_client(gateway, tenants["bob_token"]) as client:
            await client.call_tool("execute_tool", {"tool_id": "calc::add", "arguments": {"a": 1, "b": 2}})

    run(calls)
    auditor = make_user("gw_auditor_a", is_staff=True)
    tenants["a"].members.add(auditor)
    from django.contrib.auth.models import Permission

    auditor.user_permissions.add(Permission.objects.get(codename="view_auditevent"))
    token = make_token(auditor, scopes=["api"], tenant=tenants["a"])
    seen, path = [], "audit/?event_type=execution"
    response = _rest(gateway, token, path)
    assert response.status_code == 200
    seen = response.json()["results"]
    assert [row["user"] for row in seen] == ["gw_alice"]
    assert "calc::" not in response.text and "gw_bob" not in response.text and "tenant-b" not in response.text
    bobs = AuditEvent.objects.get(event_type="execution", human_subject="gw_bob")
    assert bobs.tenant_scope_id == tenants["b"].pk
    assert _rest(gateway, token, f"audit/{bobs.pk}/").status_code == 404


# --- agents (Z8) --------------------------------------------------------------------------------------------


def test_agent_grants_narrow_the_human_and_the_token_narrows_further(gateway, tenants, time_server):
    from catalog.models import Tool
    from governance.models import Agent, AgentGrant

    alice = tenants["alice"]
    agent = Agent.objects.create(user=alice, name="clock-reader", tenant=tenants["a"])
    current = Tool.objects.get(tool_id="time::get_current_time")
    AgentGrant.objects.create(agent=agent, tool=current, action="discover")
    AgentGrant.objects.create(agent=agent, tool=current, action="execute")
    greedy = Agent.objects.create(user=alice, name="greedy", tenant=tenants["a"])
    payroll_server = sync_server(slug="time2", transport="stdio", command="mcp-server-time")  # alice has no grant
    AgentGrant.objects.create(agent=greedy, server=payroll_server, action="discover")
    AgentGrant.objects.create(agent=greedy, server=payroll_server, action="execute")
    build_index()

    async def attempt(client, tool_id: str, arguments: dict[str, Any]) -> str:
        result = await client.call_tool("execute_tool", {"tool_id": tool_id, "arguments": arguments})
        return unknown_tool_text(result) or ("error" if result.is_error else "ran")

    async def observe(token: str) -> tuple[list[str], str, str]:
        async with mcp_client(gateway, token) as client:
            found = await client.call_tool("tool_search", {"query": "time", "top_k": 20})
            current = await attempt(client, "time::get_current_time", {"timezone": "UTC"})
            convert = await attempt(
                client,
                "time::convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "UTC"},
            )
            return sorted(m["tool_id"] for m in found.structured_content["matches"]), current, convert

    tokens = {
        "person": tenants["alice_token"],
        "narrowed": make_token(alice, agent=agent),
        "discover_only": make_token(alice, agent=agent, scopes=["discover"]),
        "beyond": make_token(alice, agent=greedy),
    }
    person, narrowed, discover_only, beyond = (run(lambda t=t: observe(t)) for t in tokens.values())
    assert {"time::convert_time", "time::get_current_time"} <= set(person[0]) and person[1:] == ("ran", "ran")
    assert not any(tool_id.startswith("time2::") for tool_id in person[0])
    assert narrowed == (["time::get_current_time"], "ran", UNKNOWN_TOOL_MESSAGE)  # agent ⊂ human
    # The token's scopes narrow further: found, but not executable (told so, for any tool_id).
    assert discover_only == (["time::get_current_time"], "error", "error")
    assert beyond == ([], UNKNOWN_TOOL_MESSAGE, UNKNOWN_TOOL_MESSAGE)  # a grant beyond the human's gives nothing


def test_a_token_deeper_than_the_delegation_limit_is_refused(gateway, tenants, settings):
    from governance.models import Agent

    alice = tenants["alice"]
    top = Agent.objects.create(user=alice, name="planner", tenant=tenants["a"], all_user_tools=True)
    worker = Agent.objects.create(user=alice, name="worker", tenant=tenants["a"], parent=top, all_user_tools=True)
    token = make_token(alice, agent=worker)
    listing = modern_request("tools/list")
    assert raw_post(gateway, listing, token=token).status_code == 200

    async def chain():
        async with mcp_client(gateway, token) as client:
            await client.call_tool(
                "execute_tool", {"tool_id": "time::get_current_time", "arguments": {"timezone": "UTC"}}
            )

    run(chain)
    from governance.models import AuditEvent

    event = AuditEvent.objects.get(event_type="execution", outcome="success")
    assert event.delegation_chain == ["user:gw_alice", "agent:planner", "agent:worker", "scout-gateway"]
    settings.SCOUT_DELEGATION_MAX_AGENTS = 1
    assert raw_post(gateway, listing, token=token).status_code == 401


def test_an_agents_token_cannot_mint_a_token_for_its_person(gateway, tenants):
    """Z8 never widening: a token for an agent (with the api scope) cannot create an un-narrowed token."""
    from governance.models import Agent

    alice = tenants["alice"]
    Agent.objects.create(user=alice, name="minter", tenant=tenants["a"])
    token = make_token(alice, agent=Agent.objects.get(name="minter"), scopes=["api", "discover"])
    from datetime import timedelta

    from django.utils import timezone

    soon = (timezone.now() + timedelta(minutes=30)).isoformat()  # within the minting token's own expiry
    body = {"name": "wider", "scopes": ["discover"], "expires_at": soon, "tenant": "tenant-a"}
    assert _rest(gateway, token, "tokens/", method="POST", json=body).status_code == 403
    body_b = {**body, "agent": "minter", "tenant": "tenant-b"}
    assert _rest(gateway, token, "tokens/", method="POST", json=body_b).status_code == 400
    created = _rest(gateway, token, "tokens/", method="POST", json={**body, "agent": "minter"})
    assert created.status_code == 201 and json.loads(created.content)["agent"] == "minter"
