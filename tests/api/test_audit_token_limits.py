"""/api/v1/audit/ through a staff auditor's narrower token (redteam33, Z8): an agent's token reads what its agent and
the agents below it did, not its person's whole trail, and a token limited to servers reads those servers' events
only, as the approval inbox and the catalog keep to a token's agent and servers."""

import pytest

from tests.api.conftest import api_db, give_perms, make_token

pytestmark = api_db


@pytest.fixture
def agents(owner):
    from governance.models import Agent

    give_perms(owner, "governance.view_auditevent")
    planner = Agent.objects.create(user=owner, name="planner")
    return {
        "planner": planner,
        "helper": Agent.objects.create(user=owner, name="helper", parent=planner),
        "mailer": Agent.objects.create(user=owner, name="mailer"),
    }


def _search_as(token_raw: str) -> None:
    from governance.services.tokens import api_token_verify
    from mcpgateway.services.discovery import gateway_search

    gateway_search(principal=api_token_verify(token_raw), query="list issues")


def _refs(api, token: str, query: str = "") -> set[str]:
    body = api.get(f"audit/?event_type=discovery{query}", token=token).json()
    return {event["token_ref"] for event in body["results"]}


def test_an_agents_token_reads_only_its_own_and_its_sub_agents_events(api, owner, member, catalog, agents):
    from governance.models import ApiToken, AuditEvent

    def ref(raw: str) -> str:
        return ApiToken.objects.get(display_prefix=raw[:10]).ref

    tokens = {name: make_token(owner, ["api", "discover"], agent=agent) for name, agent in agents.items()}
    own = make_token(owner, ["api", "discover"])
    for raw in (*tokens.values(), own, make_token(member, ["discover"])):
        _search_as(raw)
    everyone = _refs(api, own)
    assert len(everyone) == 5  # the person's own token reads the whole trail, as before
    assert _refs(api, tokens["planner"]) == {ref(tokens["planner"]), ref(tokens["helper"])}
    assert _refs(api, tokens["helper"]) == {ref(tokens["helper"])}
    assert _refs(api, tokens["mailer"]) == {ref(tokens["mailer"])}
    assert _refs(api, tokens["mailer"], "&user=member") == set()
    members = AuditEvent.objects.get(event_type="discovery", human_subject="member")
    assert api.get(f"audit/{members.pk}/", token=tokens["mailer"]).status_code == 404
    assert api.get(f"audit/{members.pk}/", token=own).status_code == 200


def test_a_server_limited_token_reads_only_its_servers_events(api, owner, catalog, grant):
    give_perms(owner, "governance.view_auditevent")
    grant(owner, catalog.payroll, "discover")
    wide, github_only = make_token(owner, ["api"]), make_token(owner, ["api", "server:github"])
    servers = {event["target_server"] for event in api.get("audit/?event_type=grant", token=wide).json()["results"]}
    assert servers == {"github", "payroll"}
    limited = api.get("audit/?event_type=grant", token=github_only).json()["results"]
    assert limited and {event["target_server"] for event in limited} == {"github"}


def test_a_server_limited_token_reads_its_own_searches_and_no_other_tokens(api, owner, catalog, grant):
    """redteam35: a search is an event of no server, so a token limited to servers read none of its own searches
    (redteam33 kept it to its servers' events); it reads its own now, and still no other token's."""
    from governance.models import ApiToken

    give_perms(owner, "governance.view_auditevent")
    grant(owner, catalog.github, "discover")
    mine, other = (make_token(owner, ["api", "discover", "server:github"]) for _ in range(2))
    for raw in (mine, other):
        _search_as(raw)
    assert _refs(api, mine) == {ApiToken.objects.get(display_prefix=mine[:10]).ref}
    assert len(_refs(api, make_token(owner, ["api"]))) == 2  # the person's own token reads both
