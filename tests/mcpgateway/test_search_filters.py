"""tool_search's filters over HTTP: scope="my_servers", operation_class and environment each narrow the answer.

Each test has a positive control (the same request without the filter finds the tool), so a filter that is
ignored fails the test instead of passing on an empty answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import (
    build_index,
    classify_low_risk,
    gateway_db,
    grant,
    make_token,
    make_user,
    mcp_client,
    run,
)

pytestmark = [gateway_db, pytest.mark.slow]
PAYROLL = "calc::rotate_payroll_encryption_keys"
PAYROLL_QUERY = "rotate the payroll encryption keys"
TIME_QUERY = "what is the current time in a timezone"


@pytest.fixture
def world(gateway, admin_user, time_server, calc_server) -> dict[str, Any]:
    from django.contrib.auth.models import Group

    from catalog.models import Tool

    member = make_user("gw_member")
    team = Group.objects.create(name="payroll team")
    member.groups.add(team)
    grant(admin_user, time_server, member, "discover", "execute")  # the member's own server
    grant(admin_user, calc_server, team, "discover", "execute")  # a server the member has through a group
    # An admin's classification: rotating keys is an "execute" operation allowed in staging only.
    payroll = Tool.objects.get(tool_id=PAYROLL)
    classify_low_risk(
        payroll, actor=admin_user, operation_class="execute", reversibility="irreversible", environments=("staging",)
    )
    build_index()
    return {"token": make_token(member)}


def _search(gateway, token: str, query: str, **filters: Any) -> list[str]:
    async def main():
        async with mcp_client(gateway, token) as client:
            result = await client.call_tool("tool_search", {"query": query, "top_k": 20, **filters})
            assert not result.is_error, result.content
            return [match["tool_id"] for match in result.structured_content["matches"]]

    return run(main)


def test_scope_my_servers_leaves_out_servers_granted_through_a_group(gateway, world):
    assert PAYROLL in _search(gateway, world["token"], PAYROLL_QUERY)  # control: visible through the group
    mine = _search(gateway, world["token"], PAYROLL_QUERY, scope="my_servers")
    assert all(tool_id.startswith("time::") for tool_id in mine), mine
    assert "time::get_current_time" in _search(gateway, world["token"], TIME_QUERY, scope="my_servers")


def test_operation_class_filter_keeps_only_that_class(gateway, world):
    assert PAYROLL in _search(gateway, world["token"], PAYROLL_QUERY, operation_class="execute")
    reads = _search(gateway, world["token"], PAYROLL_QUERY, operation_class="read")
    assert PAYROLL not in reads
    assert PAYROLL not in _search(gateway, world["token"], PAYROLL_QUERY, operation_class="write")


def test_environment_filter_uses_the_policy_then_the_server_environment(gateway, world):
    assert PAYROLL in _search(gateway, world["token"], PAYROLL_QUERY, environment="staging")
    in_production = _search(gateway, world["token"], PAYROLL_QUERY, environment="production")
    assert PAYROLL not in in_production
    # Tools without allowed environments run where their server runs (the time server: production).
    assert "time::get_current_time" in _search(gateway, world["token"], TIME_QUERY, environment="production")
    assert "time::get_current_time" not in _search(gateway, world["token"], TIME_QUERY, environment="staging")


def _answer_text(gateway, token: str, query: str, **filters: Any) -> str:
    async def main():
        async with mcp_client(gateway, token) as client:
            result = await client.call_tool("tool_search", {"query": query, **filters})
            assert not result.is_error, result.content
            return result.content[0].text

    return run(main)


def test_an_answer_emptied_by_a_filter_says_so_and_names_the_filter(gateway, world):
    # The time tool fits the request; only the environment filter leaves it out. The model is told to drop
    # the filter, not that no tool exists (which it would pass on to the user).
    emptied = _answer_text(gateway, world["token"], TIME_QUERY, environment="staging")
    assert "with the filters you set (environment)" in emptied and "without them" in emptied
    unfiltered_miss = _answer_text(gateway, world["token"], "book a flight to Paris for next week")
    assert unfiltered_miss.startswith("No tool fits this request.") and "filters" not in unfiltered_miss


def test_one_match_is_counted_in_the_singular(gateway, world):
    text = _answer_text(gateway, world["token"], TIME_QUERY, top_k=1)
    assert text.startswith("1 matching tool, best first."), text


def test_a_token_granted_nothing_is_told_so_not_that_no_tool_fits(gateway, world):
    # A newcomer's first token is often for a user nobody granted anything: the model should say "ask for
    # access", not "no tool can do this". The member (granted the time server) still gets the usual answers.
    stranger = make_token(make_user("gw_stranger"))
    told = _answer_text(gateway, stranger, TIME_QUERY)
    assert told.startswith("No tool is available to this token") and "ask a Scout operator" in told
    granted_miss = _answer_text(gateway, world["token"], "book a flight to Paris for next week")
    assert granted_miss.startswith("No tool fits this request.")


def test_the_query_log_says_why_an_answer_was_empty_and_the_workbench_lists_only_real_gaps(gateway, world):
    # A curator should not attach examples to a tool that fits already: a search emptied by the caller's
    # own filter, or by a token granted nothing, is no gap; a withheld request is.
    from search.models import QueryLogEntry
    from search.workbench import group_key, workbench_groups, workbench_left_out

    stranger = make_token(make_user("gw_stranger"))
    flight = "book a flight to Paris for next week"
    assert "with the filters you set" in _answer_text(gateway, world["token"], TIME_QUERY, environment="staging")
    assert _answer_text(gateway, stranger, TIME_QUERY).startswith("No tool is available to this token")
    assert _answer_text(gateway, world["token"], flight).startswith("No tool fits this request.")
    assert "matching tool" in _answer_text(gateway, world["token"], TIME_QUERY)
    entries = QueryLogEntry.objects.all()
    reasons = {(entry.user.username, entry.query, bool(entry.results)): entry.empty_reason for entry in entries}
    assert reasons == {
        ("gw_member", TIME_QUERY, False): "filtered",
        ("gw_stranger", TIME_QUERY, False): "nothing_visible",
        ("gw_member", flight, False): "withheld",
        ("gw_member", TIME_QUERY, True): "",
    }
    listed = {group.key: group for group in workbench_groups()}
    assert listed[group_key(flight)].withheld == 1
    # The time request shows up once: its answered (unfollowed) search, never as withheld.
    assert (listed[group_key(TIME_QUERY)].withheld, listed[group_key(TIME_QUERY)].unfollowed) == (0, 1)
    assert workbench_left_out() == {"filtered": 1, "nothing_visible": 1}
