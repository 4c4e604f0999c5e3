"""Hostile values over HTTP that must never reach an upstream, or reach it unchanged (SECURITY-TESTS C1-2, C1-14)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from .conftest import faulty_calls, gateway_db, make_token, make_user, modern_request, raw_post, rpc_result

pytestmark = [gateway_db, pytest.mark.slow]


@pytest.fixture
def member(member_on, faulty_server) -> Any:
    return member_on(faulty_server).user


def _call(gateway: Any, token: str, tool_id: str, arguments_json: str) -> Any:
    """A tools/call of execute_tool whose inner arguments go as the JSON text given, as written (a literal such as
    ``1e309`` or ``NaN`` that json.dumps would never write)."""
    body = modern_request("tools/call", {"name": "execute_tool", "arguments": {"tool_id": tool_id, "arguments": {}}})
    raw = json.dumps(body).replace('"arguments": {}', f'"arguments": {arguments_json}', 1)
    assert arguments_json in raw
    return raw_post(gateway, body, token=token, raw=raw.encode())


def _text(result: dict[str, Any]) -> str:
    return "".join(block.get("text", "") for block in result["content"])


def test_a_refused_token_reaches_no_upstream(gateway, member, faulty_call_log):
    """C1-2: every kind of token Scout refuses is a 401 and the tool it names is never called; the same call with
    the member's live token does reach it (the count is real)."""
    from django.utils import timezone

    from governance.models import ApiToken
    from governance.services.tokens import api_token_revoke

    live, revoked, expired = make_token(member), make_token(member), make_token(member)
    api_token_revoke(token=ApiToken.objects.get(display_prefix=revoked[:10]))
    ApiToken.objects.filter(display_prefix=expired[:10]).update(expires_at=timezone.now())
    leaver = make_token(make_user("gw_leaver"))
    leaving = ApiToken.objects.get(display_prefix=leaver[:10]).user
    leaving.is_active = False
    leaving.save()
    near_miss = live[:-1] + ("A" if live[-1] != "A" else "B")
    refused = [
        revoked,
        expired,
        leaver,
        near_miss,
        "scout_" + "A" * 43,
        "eyJhbGciOiJub25lIn0.eyJzdWIiOiJnd19tZW1iZXIifQ.",  # alg:none JWT naming the member
        "not-a-scout-token",
    ]
    statuses = [_call(gateway, token, "faulty::ping", '{"text": "refused"}').status_code for token in refused]
    assert faulty_calls(faulty_call_log, "ping") == 0
    assert statuses == [401] * len(refused)
    served = _call(gateway, live, "faulty::ping", '{"text": "served"}')
    assert served.status_code == 200 and _text(rpc_result(served)["result"]) == "served"
    assert faulty_calls(faulty_call_log, "ping") == 1


# One synced faulty server per test (its stdio sync is most of a test's time): each test below sends all its literals
# and judges each one, naming every literal that went wrong.
UNREPRESENTABLE = ["1e309", "-1e309", "NaN", "Infinity", "-Infinity", "[1, 2e400]"]
REPRESENTABLE = [
    "18446744073709551616",  # 2^64
    "-18446744073709551617",
    "123456789012345678901234567890",
    "-0.0",
    "0.1",
    "1.7976931348623157e+308",  # the largest double
    "5e-324",  # the smallest subnormal
    "[9007199254740993, -0.0]",  # 2^53 + 1, which a double would round
]


def test_a_number_json_cannot_represent_is_refused_before_the_upstream(gateway, member, faulty_call_log):
    """C1-14: a literal Python reads as infinite or not a number is refused (a parse error or a tool error)
    and the tool never runs."""
    token = make_token(member)
    wrong = []
    for literal in UNREPRESENTABLE:
        response = _call(gateway, token, "faulty::echo_json", f'{{"value": {literal}}}')
        result = rpc_result(response)["result"]
        if not (response.status_code == 200 and result["isError"] and "NaN or Infinity" in _text(result)):
            wrong.append((literal, response.status_code, result))
    assert faulty_calls(faulty_call_log, "echo_json") == 0
    assert not wrong, wrong


def test_a_number_json_can_represent_reaches_the_upstream_exactly(gateway, member, faulty_call_log):
    """C1-14: big integers, negative zero and extreme doubles reach the upstream as sent."""
    token = make_token(member)
    wrong = []
    for sent, literal in enumerate(REPRESENTABLE, start=1):
        response = _call(gateway, token, "faulty::echo_json", f'{{"value": {literal}}}')
        result = rpc_result(response)["result"] if response.status_code == 200 else None
        # The upstream wrote back json.dumps of what it received: the same text as json.dumps of what was sent.
        if result is None or result["isError"] or _text(result) != json.dumps(json.loads(literal)):
            wrong.append((literal, response.status_code, result))
        if faulty_calls(faulty_call_log, "echo_json") != sent:
            wrong.append((literal, "upstream calls", faulty_calls(faulty_call_log, "echo_json"), "expected", sent))
    assert not wrong, wrong
