"""/api/v1/servers/ and sync-runs/ through a narrower token (redteam33, Z8): one acting for an operator's agent
reaches the servers whose tools its agent may discover, as its tools/ list does (redteam31), and registers or changes
none (redteam35); one
limited to servers registers only one of them; the operator's own token reaches every server of their tenants."""

import pytest

from tests.api.conftest import api_db, give_perms, make_token

pytestmark = api_db

OPERATOR_PERMS = ("catalog.view_server", "catalog.add_server", "catalog.change_server", "catalog.view_syncrun")


@pytest.fixture
def tokens(owner, catalog, grant):
    """The operator's own token and one of their agent narrowed to github; the operator discovers both servers."""
    from governance.models import Agent, AgentGrant

    give_perms(owner, *OPERATOR_PERMS)
    grant(owner, catalog.github, "discover")
    grant(owner, catalog.payroll, "discover")
    agent = Agent.objects.create(user=owner, name="github-bot", all_user_tools=False)
    AgentGrant.objects.create(agent=agent, server=catalog.github, action="discover")
    return {
        "own": make_token(owner, ["api", "discover"]),
        "agent": make_token(owner, ["api", "discover"], agent=agent),
    }


def _slugs(response) -> list[str]:
    assert response.status_code == 200, response.text
    return sorted(row["slug"] if "slug" in row else row["server"] for row in response.json()["results"])


def test_an_agents_token_reaches_only_the_servers_its_agent_may_use(api, catalog, tokens):
    from django.utils import timezone

    from catalog.models import Server, SyncRun

    for server in (catalog.github, catalog.payroll):
        SyncRun.objects.create(server=server, status="success", started_at=timezone.now(), source="beat")
    assert _slugs(api.get("servers/", token=tokens["own"])) == ["github", "payroll"]
    assert _slugs(api.get("servers/", token=tokens["agent"])) == ["github"]
    assert len(api.get("sync-runs/", token=tokens["own"]).json()["results"]) == 2
    runs = api.get("sync-runs/", token=tokens["agent"]).json()["results"]
    assert [run["server"] for run in runs] == ["github"]
    payroll_run = SyncRun.objects.get(server=catalog.payroll)
    assert api.get(f"sync-runs/{payroll_run.pk}/", token=tokens["agent"]).status_code == 404
    assert api.get("servers/payroll/", token=tokens["agent"]).status_code == 404
    # It changes no server at all, its own included (redteam35: test_agent_tokens_change_nothing.py).
    for method, path, body in [
        ("PATCH", "servers/payroll/", {"name": "renamed by an agent"}),
        ("POST", "servers/payroll/sync/", None),
        ("POST", "servers/payroll/archive/", None),
    ]:
        assert api.request(method, path, token=tokens["agent"], json=body).status_code == 403, (method, path)
    payroll = Server.objects.get(slug="payroll")
    assert payroll.name == "payroll" and payroll.status == "active"
    assert SyncRun.objects.filter(server=payroll).count() == 1


def test_an_agents_token_registers_no_server(api, tokens):
    from catalog.models import Server

    body = {"slug": "agent-made", "name": "Agent made", "transport": "stdio", "command": "mcp-server-time"}
    refused = api.post("servers/", token=tokens["agent"], json=body)
    assert refused.status_code == 403, refused.text
    assert not Server.objects.filter(slug="agent-made").exists()


def test_a_server_limited_token_registers_only_a_server_it_is_limited_to(api, owner):
    from catalog.models import Server

    give_perms(owner, *OPERATOR_PERMS)
    github_only = make_token(owner, ["api", "server:github", "server:later"])
    body = {"slug": "elsewhere", "name": "Elsewhere", "transport": "stdio", "command": "mcp-server-time"}
    refused = api.post("servers/", token=github_only, json=body)
    assert refused.status_code == 403, refused.text
    assert not Server.objects.filter(slug="elsewhere").exists()
    made = api.post("servers/", token=github_only, json={**body, "slug": "later"})
    assert made.status_code == 201 and made.json()["slug"] == "later"


def test_an_agents_token_counts_only_the_tools_its_agent_may_see(api, catalog, tokens):
    """A server's tool_count through an agent's token is its tools/ list's count on that server: github's held tool
    (which no agent sees) counted there told it the tool exists. The operator's own token counts every live tool."""
    own = {row["slug"]: row["tool_count"] for row in api.get("servers/", token=tokens["own"]).json()["results"]}
    assert own["github"] == 2  # list_issues and the held list_secrets
    agent_rows = api.get("servers/", token=tokens["agent"]).json()["results"]
    listed = api.get("tools/", token=tokens["agent"]).json()["results"]
    assert [row["tool_id"] for row in listed] == [catalog.visible.tool_id]
    assert [(row["slug"], row["tool_count"]) for row in agent_rows] == [("github", 1)]
    assert api.get("servers/github/", token=tokens["agent"]).json()["tool_count"] == 1


LAUNCH_FIELDS = ("command", "args", "env_vars", "url", "header_env", "last_error")


def test_an_agents_token_reads_no_servers_launch_details(api, catalog, tokens):
    """How an operator starts or reaches a server (its command and arguments, the names of the variables its
    secrets are in, its URL, its last error) is the operator's: a hosted MCP server's URL often carries its secret
    (`https://mcp.example/api/mcp/s/<secret>/mcp`), and arguments a key. A token acting for the operator's agent
    (one prompt injection away from a tool's output) reads the server it uses, without them, and its sync runs
    without their error, which names the URL (redteam37, T1/T14)."""
    from django.utils import timezone

    from catalog.models import Server, SyncRun

    Server.objects.filter(pk=catalog.github.pk).update(
        transport="http",
        command="",
        args=["--api-key=sk-live-abc123"],
        env_vars=["GITHUB_TOKEN"],
        url="https://mcp.example/api/mcp/s/hosted-secret-9f8e7d/mcp",
        header_env={"Authorization": "GITHUB_TOKEN"},
        last_error="could not reach https://mcp.example/api/mcp/s/hosted-secret-9f8e7d/mcp",
    )
    own = api.get("servers/github/", token=tokens["own"]).json()
    assert own["url"].endswith("/hosted-secret-9f8e7d/mcp") and own["args"] == ["--api-key=sk-live-abc123"]
    for response in (api.get("servers/github/", token=tokens["agent"]), api.get("servers/", token=tokens["agent"])):
        assert response.status_code == 200, response.text
        assert "hosted-secret" not in response.text and "sk-live" not in response.text
        assert "GITHUB_TOKEN" not in response.text
        body = response.json()
        row = body["results"][0] if "results" in body else body
        assert row["slug"] == "github" and row["status"] == "active" and row["tool_count"] == 1
        assert not set(LAUNCH_FIELDS) & set(row), row
    run = SyncRun.objects.create(
        server=catalog.github,
        status="failed",
        started_at=timezone.now(),
        source="beat",
        error="connection refused or unreachable: https://mcp.example/api/mcp/s/hosted-secret-9f8e7d/mcp",
    )
    assert "hosted-secret" in api.get(f"sync-runs/{run.pk}/", token=tokens["own"]).text
    for response in (
        api.get(f"sync-runs/{run.pk}/", token=tokens["agent"]),
        api.get("sync-runs/", token=tokens["agent"]),
    ):
        assert response.status_code == 200, response.text
        assert "hosted-secret" not in response.text
        body = response.json()
        row = body["results"][0] if "results" in body else body
        assert row["id"] == run.pk and row["status"] == "failed" and "error" not in row
