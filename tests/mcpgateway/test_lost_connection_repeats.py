"""ORM-thread work whose Postgres session ended under it runs once more on a new connection when running it again
repeats nothing (opsux9, opsux10):

- a lost acknowledgement of a COMMIT that landed: the call's outcome (``execute_finish``, declared repeatable) runs
  again, finds its audit event written and writes nothing more (redteam45: the event was written twice);
- a read-only ``WITH ... SELECT`` is a read (runs again); a data-modifying CTE is a write (does not).

Real parts: Postgres, sessions ended with pg_terminate_backend, the gateway's ORM threads. Postgres only."""

from __future__ import annotations

import asyncio
import logging
import threading

import mcp_types as types
import psycopg
import pytest
from asgiref.sync import sync_to_async
from django.db import OperationalError, connection, connections

from catalog import connections as kept
from governance.models import ApprovalRequest, AuditEvent, ToolPolicy
from governance.services.permissions import permission_grant
from mcpgateway.db import OrmThreads, orm_threads_stop, run_orm
from mcpgateway.services.execution import ExecutionPlan, call_stopped_meanwhile, execute_finish, execute_prepare
from tests.governance.conftest import classify
from tests.governance.factories import ServerFactory, ToolFactory, tenant_token

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(connection.vendor != "postgresql", reason="Postgres sessions ended"),
]


def _end_session(params: dict, pid: int) -> None:
    """Postgres ends session ``pid`` (as for a restart or an operator), waiting until it is gone."""
    with psycopg.connect(**params, autocommit=True) as other:
        assert other.execute("SELECT pg_terminate_backend(%s, 10000)", [pid]).fetchone() == (True,)


@pytest.fixture
def commit_lands_unacknowledged(monkeypatch) -> list[int]:
    """The next COMMIT of an ORM thread is sent and applied, then its session ends before the client reads the
    answer: the client gets the dead connection's own error. Returns the sessions ended so."""
    ended: list[int] = []
    wrapper = type(connections["default"])
    commit = wrapper._commit

    def lands_then_session_ends(self) -> None:
        if ended or not threading.current_thread().name.startswith("scout-orm"):
            return commit(self)
        raw = self.connection
        ended.append(raw.info.backend_pid)
        with self.wrap_database_errors:
            raw.execute("COMMIT")  # applied by Postgres
            _end_session(self.get_connection_params(), ended[0])
            raw.execute("SELECT 1")  # the answer after COMMIT: the connection is gone
        return None

    monkeypatch.setattr(wrapper, "_commit", lands_then_session_ends)
    monkeypatch.setattr(kept, "IDLE_CHECK_SECONDS", 3600.0)  # the dead connection is not pinged away first
    yield ended
    orm_threads_stop()


def _plan(superuser, member) -> ExecutionPlan:
    server = ServerFactory(slug="shop")
    tool = ToolFactory(server=server, name="list_orders")
    for action in ("discover", "execute"):
        permission_grant(actor=superuser, target=server, action=action, holder=member)
    _, _, principal = tenant_token(member, "acme")
    plan = execute_prepare(principal=principal, tool_id=tool.tool_id, arguments={"q": "open"})
    assert isinstance(plan, ExecutionPlan), plan
    return plan


def test_a_lost_commit_acknowledgement_records_the_outcome_once(superuser, member, commit_lands_unacknowledged, caplog):
    plan = _plan(superuser, member)
    caplog.set_level(logging.WARNING, logger="mcpgateway")

    asyncio.run(
        run_orm(
            execute_finish,
            plan,
            types.CallToolResult(content=[types.TextContent(type="text", text="3 orders")]),
            outcome="success",
        )
    )

    assert len(commit_lands_unacknowledged) == 1  # the finish's commit landed, its session ended
    assert any("running it once more" in record.getMessage() for record in caplog.records)
    (event,) = AuditEvent.objects.filter(event_type="execution")
    assert event.outcome == "success" and event.payload["call_id"] == plan.call_id


def test_a_lost_acknowledgement_of_the_checks_new_approval_request_records_it_once(
    superuser, member, commit_lands_unacknowledged, caplog
):
    """opsux11 (opsux10's left item): the check before sending (``call_stopped_meanwhile``) of a call whose tool was
    classified meanwhile as needing approval opens a request; its commit landed but the acknowledgement was lost, and
    the re-run found that request and wrote an ``approval.polled`` the call never made. Its approval events now carry
    the call's id: the re-run that finds one answers the same (the request's approval_id) and writes nothing."""
    plan = _plan(superuser, member)
    classify(
        ToolPolicy.objects.get(tool=plan.tool),
        actor=superuser,
        operation_class="write",
        reversibility="irreversible",
        risk="high",
        classification_note="it cancels orders",
    )
    caplog.set_level(logging.WARNING, logger="mcpgateway")

    stopped = asyncio.run(run_orm(call_stopped_meanwhile, plan))

    assert len(commit_lands_unacknowledged) == 1  # the check's commit landed, its session ended
    assert any("running it once more" in record.getMessage() for record in caplog.records)
    (request,) = ApprovalRequest.objects.filter(tool=plan.tool)
    assert stopped.failure == "approval_now_required"
    assert stopped.result.structured_content["approval_id"] == request.approval_id
    events = AuditEvent.objects.filter(event_type__startswith="approval.").order_by("id")
    assert [(event.event_type, event.payload.get("call_id")) for event in events] == [
        ("approval.requested", plan.call_id)
    ]


@pytest.fixture
def one_thread(monkeypatch):
    monkeypatch.setattr(kept, "IDLE_CHECK_SECONDS", 3600.0)
    threads = OrmThreads(size=1)
    yield lambda fn: asyncio.run(sync_to_async(fn, thread_sensitive=False, executor=threads)())
    threads.shutdown()


def _its_session_ended(run) -> None:
    """The thread's kept connection, ended by Postgres between two pieces of work."""

    def session() -> tuple[dict, int]:
        connection.ensure_connection()
        return connection.get_connection_params(), connection.connection.info.backend_pid

    _end_session(*run(session))


def test_a_read_only_with_runs_again_a_data_modifying_one_does_not(member, one_thread):
    runs: list[str] = []

    def statement(name: str, sql: str):
        def work() -> int:
            runs.append(name)
            with connection.cursor() as cursor:
                cursor.execute(sql, [member.pk])
                return cursor.fetchone()[0]

        return work

    read = statement("read", "WITH found AS (SELECT id FROM auth_user WHERE id = %s) SELECT count(*) FROM found")
    _its_session_ended(one_thread)
    assert one_thread(read) == 1
    assert runs == ["read", "read"]  # ran once more on a new connection

    delete = statement(
        "delete", "WITH gone AS (DELETE FROM auth_user WHERE id = -%s RETURNING id) SELECT count(*) FROM gone"
    )
    _its_session_ended(one_thread)
    with pytest.raises(OperationalError):
        one_thread(delete)
    assert runs.count("delete") == 1
