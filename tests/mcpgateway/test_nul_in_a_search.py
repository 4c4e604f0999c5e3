"""A NUL character in one caller's tool_search request (T13): its query-log row is inserted in a batch with
every caller's discovery records (write-behind), and Postgres refuses a NUL in text. The batch was retried for
ever, so no caller's search was logged or audited again, and execute_tool, which writes the queue out to link
its call to a search, failed for every caller of that gateway process ("Error executing tool execute_tool")."""

from __future__ import annotations

import pytest

from .conftest import MODERN, gateway_db, grant, make_token, make_user, mcp_client, run

pytestmark = [gateway_db, pytest.mark.slow]


def _session(gateway, token: str, steps: list[tuple[str, dict]]) -> list:
    async def main():
        async with mcp_client(gateway, token, mode=MODERN) as client:
            return [await client.call_tool(name, args) for name, args in steps]

    return run(main)


def test_a_nul_in_one_callers_request_is_logged_replaced_and_holds_back_no_other_caller(
    gateway, admin_user, faulty_server, faulty_call_log, settings
):
    from governance.models import AuditEvent
    from governance.writebehind import write_behind_flush
    from search.models import QueryLogEntry

    settings.SCOUT_WRITE_BEHIND_SECONDS = 0.05  # as in production: discovery records go in batches
    mallory, bob = make_user("gw_mallory"), make_user("gw_bob")
    for user in (mallory, bob):
        grant(admin_user, faulty_server, user, "discover", "execute")
    (poisoned,) = _session(gateway, make_token(mallory), [("tool_search", {"query": "ping the\x00 server"})])
    assert not poisoned.is_error
    searched, pinged = _session(
        gateway,
        make_token(bob),
        [
            ("tool_search", {"query": "ping the server"}),
            ("execute_tool", {"tool_id": "faulty::ping", "arguments": {"text": "hi"}}),
        ],
    )
    assert not searched.is_error
    assert not pinged.is_error and pinged.structured_content == {"result": "hi"}
    write_behind_flush()
    logged = dict(QueryLogEntry.objects.values_list("user__username", "query"))
    assert logged == {"gw_mallory": "ping the\ufffd server", "gw_bob": "ping the server"}
    assert AuditEvent.objects.filter(event_type="discovery").count() == 2
