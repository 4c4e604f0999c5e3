"""Idempotency keys (SECURITY-TESTS C1 25, F13): a re-sent mutating call runs once."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from .conftest import (
    MODERN,
    classify_low_risk,
    faulty_calls,
    gateway_db,
    grant,
    make_token,
    make_user,
    mcp_client,
    run,
)

pytestmark = [gateway_db, pytest.mark.slow]
TOOL = "faulty::record_note"


@pytest.fixture
def token(gateway, member_on, admin_user, faulty_server) -> str:
    from catalog.models import Tool

    token = member_on(faulty_server).token
    # A low-risk write: no approval needed, so only the idempotency key stands between a resend and a rerun.
    classify_low_risk(
        Tool.objects.get(tool_id=TOOL), actor=admin_user, operation_class="write", reversibility="reversible"
    )
    return token


def _call(client, key: str | None, note: str) -> Any:
    payload: dict[str, Any] = {"tool_id": TOOL, "arguments": {"note": note}}
    if key is not None:
        payload["idempotency_key"] = key
    return client.call_tool("execute_tool", payload)


def test_a_resent_call_runs_once_and_returns_the_same_result(gateway, token, faulty_call_log):
    async def main():
        async with mcp_client(gateway, token, mode=MODERN) as client:
            first = await _call(client, "order-17", "hello")
            second = await _call(client, "order-17", "hello")
            other_args = await _call(client, "order-17", "goodbye")
            without_key = await _call(client, None, "hello")
            return first, second, other_args, without_key

    first, second, other_args, without_key = run(main)
    assert not first.is_error
    assert second.model_dump() == first.model_dump()
    assert other_args.is_error and other_args.structured_content["idempotency_mismatch"] is True
    assert not without_key.is_error
    assert faulty_calls(faulty_call_log, "record_note") == 2  # "order-17" once, the keyless call once


def test_concurrent_duplicates_run_once(gateway, token, faulty_call_log):
    results: list[Any] = []

    async def main():
        async with mcp_client(gateway, token, mode=MODERN) as client:
            await client.call_tool("execute_tool", {"tool_id": "faulty::ping", "arguments": {}})  # warm session

            async def send():
                results.append(await _call(client, "burst-1", "once"))

            async with anyio.create_task_group() as group:
                for _ in range(4):
                    group.start_soon(send)

    run(main)
    assert faulty_calls(faulty_call_log, "record_note") == 1
    succeeded = [r for r in results if not r.is_error]
    refused = [r for r in results if r.is_error]
    assert succeeded, "no duplicate got the result"
    assert all(r.structured_content.get("idempotency_conflict") for r in refused)


def test_keys_are_per_principal(gateway, token, faulty_call_log, admin_user):
    from django.contrib.auth import get_user_model

    from tests.governance.factories import agent_of

    member = get_user_model().objects.get(username="gw_member")
    other_token = make_token(member, agent=agent_of(member, "second-agent", all_user_tools=True))

    async def main():
        async with mcp_client(gateway, token) as client:
            await _call(client, "shared-key", "a")
        async with mcp_client(gateway, other_token) as client:
            return await _call(client, "shared-key", "b")

    result = run(main)
    assert not result.is_error  # another agent's key space: no mismatch, it ran
    assert faulty_calls(faulty_call_log, "record_note") == 2


def test_expired_keys_are_purged_with_their_results_and_the_beat_runs_it(gateway, token, faulty_call_log, settings):
    """T13: only a call reusing its own key deleted the expired record; every new key a caller sent stayed for ever,
    its whole result with it (up to SCOUT_MCP_MAX_OUTPUT_BYTES each), so one caller sending a fresh key per call grew
    the table without end."""
    from datetime import timedelta

    from django.utils import timezone

    from mcpgateway.models import IdempotencyRecord
    from mcpgateway.tasks import purge_idempotency_records
    from scoutsite import celery_app
    from scoutsite.celery import setup_periodic_tasks

    async def main():
        async with mcp_client(gateway, token, mode=MODERN) as client:
            return [await _call(client, key, "hello") for key in ("old-1", "old-2", "fresh")]

    assert not any(result.is_error for result in run(main))
    IdempotencyRecord.objects.exclude(key="fresh").update(expires_at=timezone.now() - timedelta(seconds=1))

    assert purge_idempotency_records() == 2
    assert list(IdempotencyRecord.objects.values_list("key", flat=True)) == ["fresh"]  # a live key stays

    setup_periodic_tasks(celery_app)
    entry = celery_app.conf.beat_schedule["mcpgateway: purge expired idempotency records"]
    assert entry["task"] == "mcpgateway.tasks.purge_idempotency_records" and entry["schedule"] == 3600.0


def test_a_person_keeps_at_most_the_set_number_of_live_keys_whatever_their_tokens(
    gateway, token, faulty_call_log, settings, admin_user, faulty_server
):
    """T13: within the TTL nothing bounded how many keys (each with its call's whole result, up to
    SCOUT_MCP_MAX_OUTPUT_BYTES) one person kept: a fresh key per call at the per-person /mcp rate grew the table by
    gigabytes a minute until the purge, a day later. Past SCOUT_MCP_MAX_IDEMPOTENCY_KEYS_PER_PERSON live keys a call
    with a new key is refused unsent; a repeat of a kept key is still answered, and an expired key frees its place."""
    from datetime import timedelta

    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from governance.models import AuditEvent
    from mcpgateway.models import IdempotencyRecord

    settings.SCOUT_MCP_MAX_IDEMPOTENCY_KEYS_PER_PERSON = 2
    member = get_user_model().objects.get(username="gw_member")
    second_token = make_token(member)  # another token of the same person: the same count
    other = make_user("gw_other")
    grant(admin_user, faulty_server, other, "discover", "execute")

    async def calls(raw: str, *keys: str) -> list[Any]:
        async with mcp_client(gateway, raw, mode=MODERN) as client:
            return [await _call(client, key, "hello") for key in keys]

    first, second = run(lambda: calls(token, "k-1", "k-2"))
    assert not first.is_error and not second.is_error
    (refused,) = run(lambda: calls(second_token, "k-3"))
    assert refused.is_error and refused.structured_content == {"too_many_idempotency_keys": True}
    assert "2 idempotency keys" in refused.content[0].text
    assert "SCOUT_MCP_MAX_IDEMPOTENCY_KEYS_PER_PERSON" not in refused.content[0].text
    assert faulty_calls(faulty_call_log, "record_note") == 2  # the refused call was never sent
    assert AuditEvent.objects.filter(payload__reason="too_many_idempotency_keys").count() == 1
    assert IdempotencyRecord.objects.filter(user=member).count() == 2

    # A repeat of a kept key is still answered from the record, and another person is not counted with them ...
    (repeat,) = run(lambda: calls(token, "k-1"))
    assert repeat.model_dump() == first.model_dump()
    other_token = make_token(other)
    (theirs,) = run(lambda: calls(other_token, "k-1"))
    assert not theirs.is_error
    assert faulty_calls(faulty_call_log, "record_note") == 3
    # ... and once a key expires, a new one may be kept.
    IdempotencyRecord.objects.filter(user=member, key="k-1").update(expires_at=timezone.now() - timedelta(seconds=1))
    (freed,) = run(lambda: calls(second_token, "k-3"))
    assert not freed.is_error
    assert faulty_calls(faulty_call_log, "record_note") == 4


def test_two_new_keys_of_one_person_sent_at_once_keep_no_more_than_the_limit(gateway, token, faulty_call_log, settings):
    """Postgres: redteam25's cap was counted outside any lock, so new keys claimed at the same instant (several
    tokens of the person, each sending calls at once) each counted the same kept keys and all ran: the cap held per
    instant, not per person. Both calls are held inside the gateway by a lock on the records' table (reads go on,
    no key can be written); one runs, the other is refused unsent."""
    from concurrent.futures import ThreadPoolExecutor

    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from mcpgateway.models import IdempotencyRecord
    from tests.postgres_locks import until_sessions_wait_on_locks

    if connection.vendor != "postgresql":
        pytest.skip("needs Postgres: two calls inside the gateway at once, held by a lock")
    settings.SCOUT_MCP_MAX_IDEMPOTENCY_KEYS_PER_PERSON = 1
    member = get_user_model().objects.get(username="gw_member")
    tokens = [token, make_token(member)]

    def call(raw: str, key: str) -> Any:
        async def main() -> Any:
            async with mcp_client(gateway, raw, mode=MODERN) as client:
                return await _call(client, key, key)

        return run(main)

    pool = ThreadPoolExecutor(max_workers=2)
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("LOCK TABLE mcpgateway_idempotencyrecord IN SHARE ROW EXCLUSIVE MODE")
        answers = [pool.submit(call, raw, f"new-{n}") for n, raw in enumerate(tokens)]
        until_sessions_wait_on_locks(2, "both calls are inside the gateway")
    results = [answer.result(timeout=60) for answer in answers]
    pool.shutdown()

    assert IdempotencyRecord.objects.filter(user=member).count() == 1
    refused = [result for result in results if result.is_error]
    assert [result.structured_content for result in refused] == [{"too_many_idempotency_keys": True}]
    assert faulty_calls(faulty_call_log, "record_note") == 1


def test_a_key_reused_for_another_call_is_refused_on_the_record(gateway, token, faulty_call_log):
    """redteam56 (Low, T15/C1-25): a call refused because its idempotency_key had been used for a different call
    (another tool, or the same tool with other arguments) never ran and left no trace: every other refusal of an
    execute_tool call of a tool the caller may run writes a denied execution event. It is written now, once per
    refused call; a plain repeat of the key (the same call, answered from its record) writes none."""
    from governance.models import AuditEvent

    async def main():
        async with mcp_client(gateway, token, mode=MODERN) as client:
            first = await _call(client, "order-18", "hello")
            repeat = await _call(client, "order-18", "hello")
            other_args = await _call(client, "order-18", "goodbye")
            other_tool = await client.call_tool(
                "execute_tool", {"tool_id": "faulty::ping", "arguments": {}, "idempotency_key": "order-18"}
            )
            return first, repeat, other_args, other_tool

    first, repeat, other_args, other_tool = run(main)
    assert not first.is_error and repeat.model_dump() == first.model_dump()
    assert other_args.structured_content == {"idempotency_mismatch": True}
    assert other_tool.structured_content == {"idempotency_mismatch": True}
    assert faulty_calls(faulty_call_log, "record_note") == 1 and faulty_calls(faulty_call_log, "ping") == 0
    refused = AuditEvent.objects.filter(event_type="execution", outcome="denied")
    assert sorted((e.tool_ref, e.payload["reason"]) for e in refused) == [
        ("faulty::ping", "idempotency_mismatch"),
        (TOOL, "idempotency_mismatch"),
    ]
    assert AuditEvent.objects.filter(event_type="execution", tool_ref=TOOL).count() == 2  # the run and the refusal
