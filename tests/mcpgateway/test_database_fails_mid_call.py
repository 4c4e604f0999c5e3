"""The database failing while an authorized execute_tool is under way (redteam44, T15/T5): the call still ends in an
audit event and a settled idempotency key, and an approval it used is given back when the failure kept it from
being sent.

- Every connection of the gateway ended by Postgres (a restart, a failover, an operator's pg_terminate_backend)
  while a call waits for its upstream: the check before sending and the outcome's record met a dead connection, an
  error that is not "busy", which escaped: the bare "Error executing tool", no audit event, the key "running" until
  its TTL. They now run once more on a new connection.
- New connections refused while the check before sending runs: the call is not sent (as before), and the approval
  it had used, left "consumed", is approved again for that call.

Real parts: the live gateway over HTTP, a real stdio upstream whose only slot a hang holds (the call waits, then is
checked again before sending), real terminated sessions and a real refusal (tests/db_refusal.py). Postgres only."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterator

import pytest
from django.db import OperationalError, connection

from mcpgateway.db import orm_threads_stop, run_orm
from tests.db_refusal import connections_refused

from .conftest import faulty_calls, gateway_db, grant, make_token, make_user, modern_request, raw_post, rpc_result
from .test_access_change_mid_call import _send
from .test_disconnect import _drop, _executions, _open_call, _wait_for

pytestmark = [
    gateway_db,
    pytest.mark.slow,
    pytest.mark.skipif(connection.vendor != "postgresql", reason="Postgres sessions ended and refused"),
]
NOTE = {"note": "ship the release"}


def _hang_holds_the_only_slot(gateway, admin_user, faulty_server, faulty_call_log, settings):
    settings.SCOUT_MCP_MAX_CALLS_PER_SERVER = 1
    holder_user = make_user("gw_holder")
    grant(admin_user, faulty_server, holder_user, "discover", "execute")
    holder = _open_call(gateway, make_token(holder_user), {"tool_id": "faulty::hang", "arguments": {}})
    _wait_for(lambda: faulty_calls(faulty_call_log, "hang") == 1, "the hang holds the slot")
    return holder


def _every_orm_thread_holds_a_connection(gateway) -> None:
    """Each of the gateway's ORM threads opens its connection (six pieces of work at once, each waiting for the
    others), so that ending every session leaves each thread a dead one, whichever thread runs the next work."""

    def hold() -> None:
        connection.ensure_connection()
        time.sleep(0.5)

    async def all_at_once() -> None:
        await asyncio.gather(*(run_orm(hold) for _ in range(6)))

    asyncio.run_coroutine_threadsafe(all_at_once(), gateway.loop).result(30)


@pytest.fixture
def sessions_ended(gateway) -> Iterator[None]:
    """The shared gateway's ORM threads stopped after the test (their ended connections closed): its next test must
    not meet a dead one in the seconds before the idle check would replace it."""
    yield
    orm_threads_stop()


def _end_every_other_session() -> None:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND backend_type = 'client backend'"
        )


def test_a_call_whose_database_sessions_ended_meanwhile_is_sent_and_audited(
    gateway, member_on, admin_user, faulty_server, faulty_call_log, settings, monkeypatch, sessions_ended
):
    from catalog import connections as kept
    from mcpgateway.models import IdempotencyRecord

    # A connection idle for seconds is pinged before use and replaced quietly; the failure is one that came sooner.
    monkeypatch.setattr(kept, "IDLE_CHECK_SECONDS", 3600.0)
    holder = _hang_holds_the_only_slot(gateway, admin_user, faulty_server, faulty_call_log, settings)
    _, token = member_on(faulty_server)
    waiting = _send(gateway, token, {"tool_id": "faulty::ping", "arguments": {"text": "late"}, "idempotency_key": "p"})
    _wait_for(lambda: IdempotencyRecord.objects.filter(key="p").exists(), "the ping was authorized")
    _every_orm_thread_holds_a_connection(gateway)
    _end_every_other_session()
    _drop(holder)

    result = waiting.result(timeout=60)
    assert result.get("isError") is not True and result["content"][0]["text"] == "late", result
    assert faulty_calls(faulty_call_log, "ping") == 1
    (event,) = _wait_for(lambda: _executions("faulty::ping"), "an audit event for the ping")
    assert event.outcome == "success"
    assert IdempotencyRecord.objects.get(key="p").status == "done"
    (hang,) = _wait_for(lambda: _executions("faulty::hang"), "an audit event for the hang cut off")
    assert hang.outcome == "unknown" and hang.payload["failure"] == "interrupted"


def test_an_approved_call_the_database_kept_from_being_sent_gets_its_approval_back(
    gateway, member_on, admin_user, faulty_server, faulty_call_log, settings, caplog
):
    from governance.models import ApprovalRequest
    from governance.services.approvals import approval_decide, approval_request_create
    from governance.services.tokens import api_token_verify
    from mcpgateway.models import IdempotencyRecord

    settings.SCOUT_AUDIT_RETRY_SECONDS = 60
    approver = make_user("gw_approver", is_staff=True)
    grant(admin_user, faulty_server, approver, "discover", "approve")
    _, token = member_on(faulty_server)
    tool = faulty_server.tools.get(name="record_note")
    request = approval_request_create(principal=api_token_verify(token), tool=tool, arguments=NOTE)
    approval_decide(request=request, approver=approver, approve=True, reason="go")
    holder = _hang_holds_the_only_slot(gateway, admin_user, faulty_server, faulty_call_log, settings)
    call = {"tool_id": "faulty::record_note", "arguments": NOTE, "approval_id": request.approval_id}
    waiting = _send(gateway, token, {**call, "idempotency_key": "n-1"})
    _wait_for(lambda: IdempotencyRecord.objects.filter(key="n-1").exists(), "the note was authorized")
    assert ApprovalRequest.objects.get(pk=request.pk).status == "consumed"

    caplog.set_level(logging.WARNING, logger="mcpgateway")
    with connections_refused():
        orm_threads_stop()  # their connections closed: the next ones are refused
        _drop(holder)
        _wait_for(
            lambda: any("faulty::record_note: database busy" in r.getMessage() for r in caplog.records),
            "the note's check before sending met the refusal and its outcome waits for the database",
        )
    result = waiting.result(timeout=60)
    # opsux12: the answer says the approval is not used up (it said only "busy": the agent asked an approver again).
    assert result["isError"] is True and result["structuredContent"] == {
        "service_busy": True, "approval_given_back": True, "approval_id": request.approval_id
    }, result  # fmt: skip
    text = result["content"][0]["text"]
    assert text.startswith("Scout's database is busy") and f'with approval_id "{request.approval_id}" runs it' in text
    assert faulty_calls(faulty_call_log, "record_note") == 0
    (event,) = _wait_for(lambda: _executions("faulty::record_note"), "an audit event for the note not sent")
    assert event.outcome == "error" and event.payload["failure"] == "database_busy"
    assert event.payload["approval_given_back"] is True
    assert not IdempotencyRecord.objects.filter(key="n-1").exists()  # nothing ran: the key is free again
    assert ApprovalRequest.objects.get(pk=request.pk).status == "approved"

    again = _send(gateway, token, {**call, "idempotency_key": "n-2"}).result(timeout=60)
    assert again.get("isError") is not True, again
    assert faulty_calls(faulty_call_log, "record_note") == 1
    assert ApprovalRequest.objects.get(pk=request.pk).status == "consumed"


def _call(gateway, token: str, name: str, arguments: dict) -> dict:
    return rpc_result(
        raw_post(gateway, modern_request("tools/call", {"name": name, "arguments": arguments}), token=token)
    )


def test_requests_right_after_every_session_ended_are_answered_and_audited_once(
    gateway, member_on, faulty_server, faulty_call_log, monkeypatch, sessions_ended
):
    """opsux9: each ORM thread kept a connection Postgres had ended; within the idle check's seconds a search, an
    inspect and a call that landed on one failed ("terminating connection due to administrator command"). Work
    that wrote nothing runs once more on a new connection."""
    from catalog import connections as kept
    from governance.models import AuditEvent

    monkeypatch.setattr(kept, "IDLE_CHECK_SECONDS", 3600.0)  # no ping before reuse: every thread's connection dead
    _, token = member_on(faulty_server, index=True)
    _every_orm_thread_holds_a_connection(gateway)
    _end_every_other_session()

    search = _call(gateway, token, "tool_search", {"query": "ping"})["result"]
    assert search.get("isError") is not True, search
    inspect = _call(gateway, token, "tool_inspect", {"tool_ids": ["faulty::ping"]})["result"]
    assert inspect.get("isError") is not True and "faulty::ping" in inspect["content"][0]["text"], inspect
    ping = _call(gateway, token, "execute_tool", {"tool_id": "faulty::ping", "arguments": {"text": "back"}})["result"]
    assert ping.get("isError") is not True and ping["content"][0]["text"] == "back", ping

    assert faulty_calls(faulty_call_log, "ping") == 1
    discovery = AuditEvent.objects.filter(event_type="discovery").values_list("payload__meta_tool", flat=True)
    assert sorted(discovery) == ["tool_inspect", "tool_search"]
    (event,) = _wait_for(lambda: _executions("faulty::ping"), "an audit event for the ping")
    assert event.outcome == "success"


def test_work_that_wrote_outside_a_transaction_is_not_run_again(gateway, monkeypatch, sessions_ended):
    """The same ended connections: a read runs once more, a write sent outside a transaction does not (whether the
    server applied it is not known)."""
    from catalog import connections as kept
    from catalog.models import Tool
    from governance.models import AuditEvent

    monkeypatch.setattr(kept, "IDLE_CHECK_SECONDS", 3600.0)
    runs: list[str] = []

    def read() -> int:
        runs.append("read")
        return AuditEvent.objects.count()

    def write() -> None:
        runs.append("write")
        Tool.objects.filter(pk=-1).update(description="")

    async def reads() -> list[int]:
        return await asyncio.gather(*(run_orm(read) for _ in range(6)))

    _every_orm_thread_holds_a_connection(gateway)
    _end_every_other_session()
    counts = asyncio.run_coroutine_threadsafe(reads(), gateway.loop).result(30)
    assert len(set(counts)) == 1 and runs.count("read") > 6  # a read that met an ended connection ran again

    _every_orm_thread_holds_a_connection(gateway)
    _end_every_other_session()
    with pytest.raises(OperationalError):
        asyncio.run_coroutine_threadsafe(run_orm(write), gateway.loop).result(30)
    assert runs.count("write") == 1
