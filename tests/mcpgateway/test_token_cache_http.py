"""The gateway's kept tokens over HTTP: a search with a kept token is one ORM hop, and a token revoked after it
was kept gets the same 401 as an unknown one on its next request, whatever the request."""

from __future__ import annotations

from typing import Any

import pytest

from .conftest import challenge_params, gateway_db, make_token, make_user, modern_request, raw_post, rpc_result

pytestmark = [gateway_db, pytest.mark.slow]


def search(gateway: Any, token: str) -> Any:
    return raw_post(
        gateway, modern_request("tools/call", {"name": "tool_search", "arguments": {"query": "time"}}), token=token
    )


@pytest.fixture
def orm_work(monkeypatch) -> list[str]:
    """The names of the pieces of work the gateway hands to its ORM threads (the real threads run them)."""
    from mcpgateway import db

    submitted: list[str] = []
    submit = db._threads.submit

    def counted(fn, /, *args, **kwargs):
        submitted.append(getattr(fn, "__name__", repr(fn)))
        return submit(fn, *args, **kwargs)

    monkeypatch.setattr(db._threads, "submit", counted)
    return submitted


def test_a_search_with_a_kept_token_is_one_orm_hop(gateway, orm_work):
    token = make_token(make_user("gw_hops"))
    assert search(gateway, token).status_code == 200  # verified against the database and kept
    orm_work.clear()
    response = search(gateway, token)
    assert response.status_code == 200 and "result" in rpc_result(response)
    assert len(orm_work) == 1, orm_work


@pytest.mark.parametrize(
    "request_body",
    [
        modern_request("tools/call", {"name": "tool_search", "arguments": {"query": "time"}}),
        modern_request("tools/list"),
        modern_request("prompts/list"),  # no handler looks at the caller: confirmed before the response starts
    ],
    ids=["tool_search", "tools_list", "prompts_list"],
)
def test_a_kept_token_revoked_is_401_on_its_next_request(gateway, request_body):
    from governance.models import ApiToken
    from governance.services.tokens import api_token_revoke

    token = make_token(make_user("gw_kept"))
    assert raw_post(gateway, request_body, token=token).status_code == 200
    assert raw_post(gateway, request_body, token=token).status_code == 200  # served from the kept token
    api_token_revoke(token=ApiToken.objects.get(display_prefix=token[:10]))
    refused = raw_post(gateway, request_body, token=token)
    assert refused.status_code == 401
    revoked = "The access token was revoked"
    params = challenge_params(refused)
    assert params["error"] == "invalid_token" and params["error_description"] == revoked
    assert params["resource_metadata"].endswith("/.well-known/oauth-protected-resource/mcp")
    assert refused.json() == {"error": "invalid_token", "error_description": revoked}
    assert raw_post(gateway, request_body, token=token).status_code == 401


def test_a_kept_token_revoked_leaves_no_audit_event_for_a_body_the_gateway_refuses(gateway):
    """The body guard writes a REQUEST_REJECTED event under the request's principal before it answers. A token
    kept by this process and revoked since was written down as that principal (its user, its token) although
    the answer was the 401 of an unknown token: the revoked token still acted, once per process."""
    from governance.choices import AuditEventType
    from governance.models import ApiToken, AuditEvent
    from governance.services.tokens import api_token_revoke

    token = make_token(make_user("gw_kept_body"))
    listing = modern_request("tools/list")
    assert raw_post(gateway, listing, token=token).status_code == 200  # verified against the database and kept
    assert raw_post(gateway, None, token=token, raw=b'{"jsonrpc": ').status_code == 400  # still good: on record
    rejected = AuditEvent.objects.filter(event_type=AuditEventType.REQUEST_REJECTED)
    assert rejected.filter(human_subject="gw_kept_body").count() == 1
    api_token_revoke(token=ApiToken.objects.get(display_prefix=token[:10]))

    refused = raw_post(gateway, None, token=token, raw=b'{"jsonrpc": ')
    assert refused.status_code == 401
    assert rejected.count() == 1  # nothing more under the revoked token's name (nor anyone's)
