"""POST /api/v1/search/: the MCP tool_search answer (same function, visibility, shape), over REST."""

from governance.services.tokens import api_token_verify
from tests.api.conftest import api_db, error_of, make_token

pytestmark = api_db

QUERY = {"query": "list the issues of a repository", "top_k": 5}


def test_same_answer_as_tool_search(api, catalog, member):
    from mcpgateway.services.discovery import gateway_search

    token = make_token(member, ["api", "discover"])
    response = api.post("search/", token=token, json=QUERY)
    assert response.status_code == 200, response.text
    body = response.json()
    assert [m["tool_id"] for m in body["matches"]] == ["github::list_issues"]
    assert set(body) == {"matches", "confidence", "degraded", "abstained"}
    assert body == gateway_search(principal=api_token_verify(token), client=None, **QUERY).structured()


def test_a_clamped_top_k_is_said_as_over_mcp(api, catalog, member):
    from mcpgateway.services.discovery import TOP_K_CAPPED

    token = make_token(member, ["api", "discover"])
    capped = api.post("search/", token=token, json={**QUERY, "top_k": 500}).json()
    assert capped["notes"] == [TOP_K_CAPPED] and [m["tool_id"] for m in capped["matches"]] == ["github::list_issues"]
    assert "500" not in str(capped)


def test_hidden_tools_change_nothing(api, catalog, member):
    token = make_token(member, ["api", "discover"])
    with_hidden = api.post("search/", token=token, json={**QUERY, "query": "list issues secrets salaries"}).json()
    catalog.hidden.delete()
    catalog.held.delete()
    without = api.post("search/", token=token, json={**QUERY, "query": "list issues secrets salaries"}).json()
    assert with_hidden == without
    assert "salaries" not in str(with_hidden) and "secrets" not in str(with_hidden)


def test_writes_the_discovery_audit_event(api, catalog, member):
    from governance.models import AuditEvent

    api.post("search/", token=make_token(member, ["api", "discover"]), json=QUERY)
    event = AuditEvent.objects.get(event_type="discovery")
    assert event.payload["meta_tool"] == "tool_search" and event.payload["returned"] == ["github::list_issues"]
    assert event.human_subject == "member"


def test_validation_errors(api, catalog, member):
    token = make_token(member, ["api", "discover"])
    for body, field in [
        ({"query": ""}, "query"),
        ({}, "query"),
        ({"query": "x" * 5000}, "query"),
        ({"query": "list", "top_k": "five"}, "top_k"),
        ({"query": "list", "environment": "e" * 60}, "environment"),
        ({"query": "list", "operation_class": "delete"}, "operation_class"),
        ({"query": "list", "scope": "everything"}, "scope"),
        ({"query": "   "}, "query"),
    ]:
        response = api.post("search/", token=token, json=body)
        assert response.status_code == 400, body
        assert field in error_of(response)["fields"], body


def test_a_lone_surrogate_is_a_400_not_a_500(api, catalog, member):
    """A ``\\ud800`` escape decodes to no character: the search failed encoding it for the database (a 500 and a
    traceback per request). Refused as the body's other parse errors; a surrogate pair (an emoji) is served."""
    token = make_token(member, ["api", "discover"])
    json_body = {"Content-Type": "application/json"}
    for raw in (b'{"query": "list \\ud800 issues"}', b'{"query": "list issues", "environment": "\\udfff"}'):
        response = api.post("search/", token=token, content=raw, headers=json_body)
        assert response.status_code == 400, response.text
        assert error_of(response)["code"] == "parse_error" and "lone surrogate" in error_of(response)["message"]
    served = api.post("search/", token=token, content=b'{"query": "list issues \\ud83d\\ude00"}', headers=json_body)
    assert served.status_code == 200 and served.json()["matches"]


def test_needs_discover_scope(api, catalog, member):
    response = api.post("search/", token=make_token(member, ["api", "approve"]), json=QUERY)
    assert response.status_code == 403 and error_of(response)["code"] == "insufficient_scope"
    assert "list_issues" not in response.text


def test_server_limited_token(api, catalog, member, grant):
    grant(member, catalog.payroll, "discover")
    token = make_token(member, ["api", "discover", "server:payroll"])
    body = api.post("search/", token=token, json={"query": "list the issues"}).json()
    assert [m["tool_id"] for m in body["matches"]] == ["payroll::list_salaries"]


def test_a_rest_search_is_logged_like_tool_search(api, catalog, member):
    from search.models import QueryLogEntry

    api.post("search/", token=make_token(member, ["api", "discover"]), json=QUERY)
    entry = QueryLogEntry.objects.get()
    assert entry.query == QUERY["query"] and entry.user == member and entry.client == "api"
    assert [r["tool_id"] for r in entry.results] == ["github::list_issues"]
