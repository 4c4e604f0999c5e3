"""Approvals end to end: a mutating call waits, an approver approves it in the admin over HTTP, it runs once."""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from .conftest import MODERN, faulty_calls, gateway_db, grant, make_token, make_user, mcp_client, run

pytestmark = [gateway_db, pytest.mark.slow]
TOOL = "faulty::record_note"


@pytest.fixture
def setup(gateway, member_on, admin_user, faulty_server) -> dict[str, Any]:
    token = member_on(faulty_server).token
    approver = make_user("gw_approver", is_staff=True)
    grant(admin_user, faulty_server, approver, "discover", "approve")
    return {"token": token}


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def _execute(gateway: Any, token: str, arguments: dict[str, Any], approval_id: str | None = None) -> Any:
    """One execute_tool call of TOOL over HTTP (2026-07-28), with ``approval_id`` when given."""

    async def call() -> Any:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            payload: dict[str, Any] = {"tool_id": TOOL, "arguments": arguments}
            if approval_id:
                payload["approval_id"] = approval_id
            return await client.call_tool("execute_tool", payload)

    return run(call)


def _admin_approve(base_url: str, approval_url: str, username: str) -> httpx.Response:
    """Log in to the Django admin as ``username`` and approve the request at ``approval_url``."""
    with httpx.Client(base_url=base_url, timeout=30, follow_redirects=False) as browser:
        login_page = browser.get("/admin/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page.text).group(1)
        logged_in = browser.post(
            "/admin/login/?next=/admin/",
            data={"username": username, "password": f"pw-{username}-123", "csrfmiddlewaretoken": csrf},
        )
        assert logged_in.status_code == 302, logged_in.text[:500]
        path = approval_url.removeprefix(base_url)
        page = browser.get(path)
        assert page.status_code == 200, page.text[:500]
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        return browser.post(path, data={"csrfmiddlewaretoken": csrf, "reason": "looks fine", "_approve": "1"})


def test_mutating_call_runs_once_after_an_approver_approves_it_in_the_admin(
    gateway, setup, faulty_call_log, admin_user
):
    from governance.models import ApprovalRequest

    arguments = {"note": "ship the release"}

    async def ask(approval_id: str | None = None, args: dict[str, Any] = arguments) -> Any:
        async with mcp_client(gateway, setup["token"], mode=MODERN) as client:
            payload = {"tool_id": TOOL, "arguments": args}
            if approval_id:
                payload["approval_id"] = approval_id
            return await client.call_tool("execute_tool", payload)

    first = run(ask)
    assert first.is_error and first.structured_content["approval_required"] is True
    approval_id = first.structured_content["approval_id"]
    approval_url = first.structured_content["approval_url"]
    assert approval_id in _text(first) and approval_url in _text(first)
    assert "only answers that the request is still waiting" in _text(first)  # calling early is a safe poll
    # When and how to check: MCP's task polling hint (milliseconds) for a program, and one line for the model
    # naming the meta-tool and the argument that checks, paced so a model does not poll at once and often.
    assert first.structured_content["pollInterval"] == 60_000
    check = f'call execute_tool again with the same tool_id, the same arguments and approval_id "{approval_id}"'
    assert check in _text(first) and "at most once every 60 seconds" in _text(first)
    assert approval_url.startswith(f"{gateway.url}/admin/governance/approvalrequest/")
    assert ApprovalRequest.objects.get(approval_id=approval_id).status == "pending"
    assert faulty_calls(faulty_call_log, "record_note") == 0

    pending = run(lambda: ask(approval_id))
    assert pending.is_error and pending.structured_content["approval_pending"] is True
    # An agent polling a pending request is told to wait and poll again with the same id, never to open
    # another request (which would only wait in the same queue).
    assert "waiting for an approver" in _text(pending) and check in _text(pending)
    assert pending.structured_content["pollInterval"] == 60_000 and "at most once every 60 seconds" in _text(pending)
    assert "request a new one" not in _text(pending) and pending.structured_content["approval_id"] == approval_id
    # Where and until when an approver decides, as the first answer said: the user may ask while it waits.
    assert pending.structured_content["approval_url"] == approval_url
    expires = ApprovalRequest.objects.get(approval_id=approval_id).expires_at
    assert f"waiting for an approver at {approval_url} (open until {expires:%Y-%m-%d %H:%M} UTC)" in _text(pending)

    decided = _admin_approve(gateway.url, approval_url, "gw_approver")
    assert decided.status_code == 302, decided.text[:500]
    assert ApprovalRequest.objects.get(approval_id=approval_id).status == "approved"

    swapped = run(lambda: ask(approval_id, {"note": "drop the database"}))
    assert swapped.is_error and swapped.structured_content["approval_rejected"] == "arguments_mismatch"
    assert "exactly those arguments" in _text(swapped)
    assert faulty_calls(faulty_call_log, "record_note") == 0

    executed = run(lambda: ask(approval_id))
    assert not executed.is_error, _text(executed)
    assert _text(executed) == "stored 16 characters"
    assert faulty_calls(faulty_call_log, "record_note") == 1

    again = run(lambda: ask(approval_id))
    assert again.is_error and again.structured_content["approval_rejected"] == "used"
    assert faulty_calls(faulty_call_log, "record_note") == 1
    assert ApprovalRequest.objects.get(approval_id=approval_id).status == "consumed"


def test_a_pending_approval_with_other_arguments_is_refused_as_a_mismatch_not_told_to_wait(
    gateway, setup, faulty_call_log
):
    """A model that changed the arguments while its request waits is told the approval is not for them, before
    anything about the request's state: "still waiting" would have it wait for an approval it can never use."""
    from governance.models import ApprovalRequest, AuditEvent

    first = _execute(gateway, setup["token"], {"note": "ship the release"})
    approval_id = first.structured_content["approval_id"]
    changed = _execute(gateway, setup["token"], {"note": "ship it all"}, approval_id)
    assert changed.is_error and changed.structured_content == {"approval_rejected": "arguments_mismatch"}
    text = _text(changed)
    assert "arguments differ from the ones this approval was asked for" in text
    assert "without approval_id to ask approval for these new arguments" in text
    assert "waiting" not in text and "Wait" not in text
    assert ApprovalRequest.objects.get().status == "pending"  # neither used nor a second request opened
    assert AuditEvent.objects.filter(event_type="approval.rejected", payload__code="arguments_mismatch").exists()
    assert faulty_calls(faulty_call_log, "record_note") == 0


def test_polls_of_a_pending_approval_are_audited_as_polls_not_as_rejections(gateway, setup, admin_user):
    """An agent polls its waiting request as it is told to: each poll is on the record (every execute_tool call is
    accounted for) as what it is, not as "approval.rejected"/denied, which an operator or approver reads as
    refusals; the trail's filters (REST audit/ as the admin's) still count the real refusal exactly."""
    token, arguments = setup["token"], {"note": "ship the release"}
    approval_id = _execute(gateway, token, arguments).structured_content["approval_id"]
    for _ in range(2):
        assert _execute(gateway, token, arguments, approval_id).structured_content["approval_pending"] is True
    again = _execute(gateway, token, arguments)  # the same call without its approval_id: the same request
    assert again.structured_content["approval_id"] == approval_id
    refused = _execute(gateway, token, {"note": "ship it all"}, approval_id)  # a real refusal: other arguments
    assert refused.structured_content == {"approval_rejected": "arguments_mismatch"}

    operator = make_token(admin_user, ["api"])

    def audit(query: str) -> list[dict[str, Any]]:
        response = httpx.get(
            f"{gateway.url}/api/v1/audit/?tool={TOOL}&{query}", headers={"Authorization": f"Bearer {operator}"}
        )
        assert response.status_code == 200, response.text[:500]
        return [event for event in response.json()["results"] if event["approval_ref"] == approval_id]

    polls = audit("event_type=approval.polled")
    assert [(event["outcome"], event["payload"]) for event in polls] == [("pending", {"status": "pending"})] * 3
    assert len(audit("event_type=approval.requested")) == 1  # five execute_tool calls, five events
    rejected = audit("event_type=approval.rejected")
    assert [event["payload"]["code"] for event in rejected] == ["arguments_mismatch"]
    assert [event["event_type"] for event in audit("outcome=denied")] == ["approval.rejected"]


def test_the_same_call_without_its_approved_approval_id_is_pointed_to_it_not_asked_again(
    gateway, setup, faulty_call_log
):
    """A model that drops the approval_id once its call is approved is told that id again: a new request would put
    a call already approved back in an approver's inbox."""
    from django.contrib.auth import get_user_model

    from governance.models import ApprovalRequest, AuditEvent
    from governance.services.approvals import approval_decide

    async def ask(approval_id: str | None = None) -> Any:
        async with mcp_client(gateway, setup["token"], mode=MODERN) as client:
            payload: dict[str, Any] = {"tool_id": TOOL, "arguments": {"note": "ship the release"}}
            if approval_id:
                payload["approval_id"] = approval_id
            return await client.call_tool("execute_tool", payload)

    approval_id = run(ask).structured_content["approval_id"]
    approver = get_user_model().objects.get(username="gw_approver")
    approval_decide(request=ApprovalRequest.objects.get(), approver=approver, approve=True, reason="")

    again = run(ask)
    assert again.is_error and again.structured_content == {"approval_ready": True, "approval_id": approval_id}
    assert f"already approved (approval_id {approval_id})" in _text(again)
    assert f'approval_id "{approval_id}" to run it' in _text(again)
    assert ApprovalRequest.objects.count() == 1 and faulty_calls(faulty_call_log, "record_note") == 0

    asked_about = AuditEvent.objects.filter(event_type="approval.polled", approval_ref=approval_id)
    assert [event.payload for event in asked_about] == [{"status": "approved"}]  # on the record, not a request
    executed = run(lambda: ask(approval_id))
    assert not executed.is_error and faulty_calls(faulty_call_log, "record_note") == 1
    after_use = run(ask)  # used up: the same call now asks anew
    assert after_use.structured_content["approval_required"] is True and ApprovalRequest.objects.count() == 2


def test_forged_approval_id_is_rejected_without_execution(gateway, setup, faulty_call_log):
    async def main():
        async with mcp_client(gateway, setup["token"]) as client:
            forged = await client.call_tool(
                "execute_tool", {"tool_id": TOOL, "arguments": {"note": "x"}, "approval_id": "apr_" + "A" * 22}
            )
            oversized = await client.call_tool(
                "execute_tool", {"tool_id": TOOL, "arguments": {"note": "x"}, "approval_id": "apr_" + "A" * 5000}
            )
            return forged, oversized

    forged, oversized = run(main)
    assert forged.is_error and forged.structured_content["approval_rejected"] == "unknown"
    assert oversized.is_error and "A" * 100 not in _text(oversized)
    assert faulty_calls(faulty_call_log, "record_note") == 0


def test_an_approval_is_bound_to_the_requesting_token_not_only_the_user(gateway, setup, faulty_call_log):
    """Another token of the same user cannot use the approval (the principal is the token, T12)."""
    from django.contrib.auth import get_user_model

    from governance.models import ApprovalRequest

    member = get_user_model().objects.get(username="gw_member")
    other_token = make_token(member)
    arguments = {"note": "rotate the keys"}

    async def ask(token: str, approval_id: str | None = None) -> Any:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            payload = {"tool_id": TOOL, "arguments": arguments}
            if approval_id:
                payload["approval_id"] = approval_id
            return await client.call_tool("execute_tool", payload)

    first = run(lambda: ask(setup["token"]))
    approval_id = first.structured_content["approval_id"]
    decided = _admin_approve(gateway.url, first.structured_content["approval_url"], "gw_approver")
    assert decided.status_code == 302
    assert ApprovalRequest.objects.get(approval_id=approval_id).status == "approved"

    stolen = run(lambda: ask(other_token, approval_id))
    assert stolen.is_error and stolen.structured_content["approval_rejected"] == "unknown"
    assert faulty_calls(faulty_call_log, "record_note") == 0
    assert ApprovalRequest.objects.get(approval_id=approval_id).status == "approved"  # still usable by its owner

    owner = run(lambda: ask(setup["token"], approval_id))  # positive control: the requesting token runs it
    assert not owner.is_error, _text(owner)
    assert faulty_calls(faulty_call_log, "record_note") == 1


def test_an_approval_is_for_the_exact_characters_asked_for_not_a_look_alike_spelling(gateway, setup, faulty_call_log):
    """redteam49: an approval of "café" written as one code point (NFC) is refused for "café" written as "e" and a
    combining accent (NFD) or with a zero-width joiner inside: a normalising digest would run, as approved, a call
    whose bytes the approver never saw (a file name, a key, an address an upstream reads byte for byte)."""
    from governance.models import ApprovalRequest

    first = _execute(gateway, setup["token"], {"note": "caf\u00e9"})
    approval_id = first.structured_content["approval_id"]
    decided = _admin_approve(gateway.url, first.structured_content["approval_url"], "gw_approver")
    assert decided.status_code == 302
    for spelling in ("cafe\u0301", "caf\u200d\u00e9", "CAF\u00c9"):
        other = _execute(gateway, setup["token"], {"note": spelling}, approval_id)
        assert other.is_error and other.structured_content["approval_rejected"] == "arguments_mismatch", spelling
    assert faulty_calls(faulty_call_log, "record_note") == 0
    assert ApprovalRequest.objects.get(approval_id=approval_id).status == "approved"
    exact = _execute(gateway, setup["token"], {"note": "caf\u00e9"}, approval_id)  # control: as asked, it runs
    assert not exact.is_error, _text(exact)
    assert faulty_calls(faulty_call_log, "record_note") == 1


def test_an_approved_calls_result_is_never_replayed_to_another_token_by_its_idempotency_key(
    gateway, setup, faulty_call_log
):
    """T5, T12: an idempotency key is answered before the approval gate, and keys were shared by a person's tokens
    (person, agent, tenant): another token of the same person sending the call with the same key got the result of
    the call the first token ran with its approval, without any approval of its own. Keys are now the token's: the
    other token is asked for an approval; the first still gets its stored result."""
    from django.contrib.auth import get_user_model

    member = get_user_model().objects.get(username="gw_member")
    other_token = make_token(member)
    arguments = {"note": "rotate the keys"}

    async def ask(token: str, approval_id: str | None = None) -> Any:
        async with mcp_client(gateway, token, mode=MODERN) as client:
            payload = {"tool_id": TOOL, "arguments": arguments, "idempotency_key": "rotate-1"}
            if approval_id:
                payload["approval_id"] = approval_id
            return await client.call_tool("execute_tool", payload)

    first = run(lambda: ask(setup["token"]))
    approval_id = first.structured_content["approval_id"]
    assert _admin_approve(gateway.url, first.structured_content["approval_url"], "gw_approver").status_code == 302
    owner = run(lambda: ask(setup["token"], approval_id))
    assert not owner.is_error, _text(owner)
    assert faulty_calls(faulty_call_log, "record_note") == 1

    other = run(lambda: ask(other_token))
    assert other.is_error and other.structured_content.get("approval_required"), _text(other)
    assert _text(owner) not in _text(other)
    assert faulty_calls(faulty_call_log, "record_note") == 1

    again = run(lambda: ask(setup["token"], approval_id))  # the owner's retry: its stored result, no second run
    assert not again.is_error and _text(again) == _text(owner)
    assert faulty_calls(faulty_call_log, "record_note") == 1


def test_no_one_in_the_requests_delegation_chain_can_approve_it_over_http(
    gateway, admin_user, setup, faulty_server, faulty_call_log
):
    """Z9 "approval by the requesting agent or its own chain": a person calls through an agent below another
    agent; neither the person in the admin nor an approve-scoped token of the agent at the top of the chain
    over the REST API can approve it, though the person holds approve on the tool. Nothing runs until someone
    outside the chain approves."""
    from governance.models import Agent, ApprovalRequest

    lead = make_user("gw_lead", is_staff=True)
    grant(admin_user, faulty_server, lead, "discover", "execute", "approve")
    planner = Agent.objects.create(user=lead, name="planner", all_user_tools=True)
    worker = Agent.objects.create(user=lead, name="worker", parent=planner, all_user_tools=True)
    worker_token = make_token(lead, agent=worker)
    planner_approves = make_token(lead, ["api", "discover", "approve"], agent=planner)
    arguments = {"note": "rotate the keys"}

    first = _execute(gateway, worker_token, arguments)
    approval_id = first.structured_content["approval_id"]
    request = ApprovalRequest.objects.get(approval_id=approval_id)
    assert request.delegation_chain == ["user:gw_lead", "agent:planner", "agent:worker", "scout-gateway"]

    _admin_approve(gateway.url, first.structured_content["approval_url"], "gw_lead")
    assert ApprovalRequest.objects.get(approval_id=approval_id).status == "pending"  # the admin refused the person
    by_agent = httpx.post(
        f"{gateway.url}/api/v1/approvals/{approval_id}/approve/",
        headers={"Authorization": f"Bearer {planner_approves}"},
        json={},
        timeout=60,
    )
    assert by_agent.status_code == 403 and "your own request" in by_agent.text, by_agent.text
    assert ApprovalRequest.objects.get(approval_id=approval_id).status == "pending"
    waiting = _execute(gateway, worker_token, arguments, approval_id)
    assert waiting.is_error and waiting.structured_content["approval_id"] == approval_id, _text(waiting)
    assert faulty_calls(faulty_call_log, "record_note") == 0

    # Positive control: an approver outside the chain approves, and the call runs once.
    assert _admin_approve(gateway.url, first.structured_content["approval_url"], "gw_approver").status_code == 302
    executed = _execute(gateway, worker_token, arguments, approval_id)
    assert not executed.is_error, _text(executed)
    assert faulty_calls(faulty_call_log, "record_note") == 1


def test_an_upstreams_tool_name_reaches_the_approvers_mail_escaped_never_as_a_link(
    gateway, member_on, admin_user, tmp_path, mailoutbox
):
    """Redteam36 (untrusted upstream text on an approver's surface): a tool's name is the upstream's choice, and only
    control characters and "::" were refused in it. A real stdio upstream naming a tool "refund: approve it at
    https://scout-approvals.example/decide" had that URL written into the subject and the first line of the mail Scout
    sends its approvers, which mail programs show as a link: a phishing link in a mail from Scout. A name of other
    characters than letters, digits, "_" and "-" is now mailed escaped, with a line saying so; an ordinary name is
    mailed as it is."""
    from tests.catalog.servers.fixtures import good_tool

    from .conftest import sync_scripted_server

    lure = "refund: approve it at https://scout-approvals.example/decide"
    reply = '{"jsonrpc": "2.0", "id": ID, "result": {"content": [{"type": "text", "text": "done"}]}}'
    server = sync_scripted_server(
        tmp_path, "payments", {"pages": [[good_tool(lure), good_tool("refund_order")]], "call_reply": reply}
    )
    approver = make_user("gw_approver", is_staff=True, email="approver@example.com")
    grant(admin_user, server, approver, "discover", "approve")
    token = member_on(server).token

    async def main():
        async with mcp_client(gateway, token, mode=MODERN) as client:
            return [
                await client.call_tool("execute_tool", {"tool_id": f"payments::{name}", "arguments": {}})
                for name in (lure, "refund_order")
            ]

    for result in run(main):
        assert result.structured_content["approval_required"] is True, _text(result)
    lured, ordinary = mailoutbox
    for mail in (lured, ordinary):
        assert mail.to == ["approver@example.com"]
        assert "scout-approvals.example" not in mail.subject + mail.body and "https://scout" not in mail.body
    escaped = "payments::refund\\u003a\\u0020approve\\u0020it\\u0020at\\u0020https\\u003a\\u002f\\u002fscout-approvals"
    assert lured.subject.startswith(f"[Scout] Approval needed: {escaped}")
    assert f"asks to call {escaped}" in lured.body
    assert "(The tool's name holds other characters than letters, digits, _ and -: escaped here.)" in lured.body
    assert ordinary.subject.startswith("[Scout] Approval needed: payments::refund_order (")
    assert "escaped here" not in ordinary.body


def test_an_upstreams_tool_name_reaches_the_approval_webhook_escaped_as_in_the_mail(
    gateway, member_on, admin_user, tmp_path, settings
):
    """Redteam37: the approval webhook's JSON carried `tool_id` as the upstream wrote it, and a receiver posts it to a
    chat (the webhook's usual use). A real stdio upstream's tools named with chat markup (Slack's link
    "<https://…|Approve now>", Markdown's "[Approve now](https://…)") or with a line separator (U+2028, a line break
    once decoded) followed by text reading as another field ("decide_url: https://…") reached the receiver as written:
    JSON's escaping is undone by any parser. The webhook now names the tool as the mail does (every character but
    letters, digits, _ and -: \\uXXXX) and says so (`tool_name_escaped`); an ordinary name is sent as it is."""
    import json

    from tests.catalog.servers.fixtures import good_tool
    from tests.governance.conftest import _receiving

    from .conftest import sync_scripted_server

    # The third lure of redteam37, a line separator (U+2028) before "decide_url: …", is refused at sync since
    # redteam41 (catalog.definitions.name_spelling_problem; tests/mcpgateway/test_tool_name_spelling.py), so it never
    # reaches an approval.
    lures = [
        "refund <https://scout-approvals.example/decide|Approve now>",
        "refund [Approve now](https://scout-approvals.example/decide)",
    ]
    reply = '{"jsonrpc": "2.0", "id": ID, "result": {"content": [{"type": "text", "text": "done"}]}}'
    server = sync_scripted_server(
        tmp_path, "payments", {"pages": [[*map(good_tool, lures), good_tool("refund_order")]], "call_reply": reply}
    )
    token = member_on(server).token
    with _receiving() as (url, received):
        settings.SCOUT_APPROVAL_WEBHOOK_URL = url

        async def main():
            async with mcp_client(gateway, token, mode=MODERN) as client:
                return [
                    await client.call_tool("execute_tool", {"tool_id": f"payments::{name}", "arguments": {}})
                    for name in [*lures, "refund_order"]
                ]

        for name, result in zip([*lures, "refund_order"], run(main), strict=True):
            assert result.structured_content.get("approval_required") is True, (name, _text(result))
    bodies = [json.loads(body) for _, body in received]
    assert len(bodies) == 3
    for body in bodies[:2]:
        assert body["tool_name_escaped"] is True, body
        name = body["tool_id"].removeprefix("payments::")
        assert re.fullmatch(r"(?:[A-Za-z0-9_-]|\\u[0-9a-f]{4})+", name), name
        assert "scout-approvals.example" not in body["tool_id"]
    assert bodies[0]["tool_id"].startswith("payments::refund\\u0020\\u003chttps\\u003a")
    assert bodies[1]["tool_id"].startswith("payments::refund\\u0020\\u005bApprove\\u0020now\\u005d\\u0028https")
    assert bodies[2]["tool_id"] == "payments::refund_order" and bodies[2]["tool_name_escaped"] is False
