"""Refusals are clean and on the record (issue 12 item 6): error texts never echo the caller's input or
library internals, and forged approval ids, early validation errors and body-guard rejections are audited."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import gateway_db, make_token, modern_request, raw_post, rpc_result

pytestmark = [gateway_db, pytest.mark.slow]
OVER_LIMIT = 1024 * 1024 + 1  # past the default body limit the guard was built with
SECRET = "SECRET-4f1d"  # caller input that must never come back in an error


@pytest.fixture
def member(member_on, faulty_server) -> Any:
    return member_on(faulty_server).user


@pytest.fixture
def token(member) -> str:
    return make_token(member)


def _call(gateway, token: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    body = modern_request("tools/call", {"name": name, "arguments": arguments})
    return rpc_result(raw_post(gateway, body, token=token))["result"]


def _events(event_type: str, **filters: Any) -> list[Any]:
    from governance.models import AuditEvent

    return list(AuditEvent.objects.filter(event_type=event_type, **filters).order_by("id"))


@pytest.mark.parametrize(
    ("tool", "arguments", "expected"),
    [
        ("tool_search", {"query": "time", "top_k": SECRET}, "top_k must be an integer"),
        ("tool_search", {"query": "time", "scope": SECRET}, "scope must be one of"),
        ("tool_search", {"top_k": 3}, "query is required"),
        ("tool_inspect", {"tool_ids": SECRET}, "tool_ids must be a list"),
        ("tool_inspect", {"tool_ids": [SECRET, {"x": SECRET}]}, "tool_ids[1] must be a string"),
        ("execute_tool", {"tool_id": "faulty::ping", "arguments": SECRET}, "arguments must be a JSON object"),
    ],
)
def test_meta_tool_argument_errors_name_the_field_never_the_value(gateway, token, tool, arguments, expected):
    result = _call(gateway, token, tool, arguments)
    text = result["content"][0]["text"]
    assert result["isError"] is True and expected in text
    for leak in (SECRET, "pydantic", "input_value", "validation error", "type="):
        assert leak not in text


def test_a_forged_approval_id_is_refused_and_audited_without_echoing_it(gateway, token, member):
    forged = "apr_" + "f" * 20
    result = _call(
        gateway,
        token,
        "execute_tool",
        {"tool_id": "faulty::record_note", "arguments": {"note": "x"}, "approval_id": forged},
    )
    assert result["isError"] is True and result["structuredContent"]["approval_rejected"] == "unknown"
    (event,) = _events("approval.rejected", tool__tool_id="faulty::record_note")
    assert event.outcome == "denied" and event.user_id == member.pk and event.payload == {"code": "unknown"}
    assert forged not in str(event.__dict__)


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        ({"approval_id": "x" * 500}, "invalid_approval_id"),
        ({"idempotency_key": "order\x00-17"}, "invalid_idempotency_key"),  # Postgres refuses a NUL in text
    ],
)
def test_early_validation_errors_write_a_denied_execution_event(gateway, token, member, extra, reason):
    result = _call(gateway, token, "execute_tool", {"tool_id": "faulty::ping", "arguments": {}, **extra})
    assert result["isError"] is True
    (event,) = _events("execution", tool__tool_id="faulty::ping")
    assert event.outcome == "denied" and event.user_id == member.pk
    assert event.payload == {"meta_tool": "execute_tool", "reason": reason}


@pytest.mark.parametrize(
    ("raw", "status", "rule"),
    [
        (b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "tools/list"}', 400, "Parse error: duplicate object keys"),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}]', 400, "JSON-RPC batches are not supported"),
        (
            b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"x": "' + b"y" * OVER_LIMIT + b'"}}',
            413,
            None,
        ),
    ],
)
def test_body_guard_rejections_are_audited_with_the_verified_caller(
    gateway, token, member, settings, raw, status, rule
):
    response = raw_post(gateway, None, token=token, raw=raw)
    assert response.status_code == status, response.text
    (event,) = _events("request.rejected")
    assert event.outcome == "denied" and event.user_id == member.pk
    assert event.payload["status"] == status and (rule is None or rule in event.payload["rule"])
    assert b"y" * 64 not in str(event.payload).encode()
