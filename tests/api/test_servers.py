"""/api/v1/servers/: list, register, edit, archive, sync, for operators with catalog model permissions."""

import sys
from pathlib import Path

import pytest

from catalog.models import SyncRun
from tests.api.conftest import api_db, error_of, give_perms, make_token

pytestmark = api_db

OPERATOR_PERMS = ("catalog.view_server", "catalog.add_server", "catalog.change_server", "catalog.view_syncrun")
TIME_SERVER = {"slug": "time", "name": "Time", "transport": "stdio", "command": "mcp-server-time"}


@pytest.fixture
def operator(owner):
    give_perms(owner, *OPERATOR_PERMS)
    return make_token(owner, ["api"])


def test_list_servers_paginated(api, catalog, operator):
    from tests.governance.factories import ServerFactory

    ServerFactory(slug="zeta")
    body = api.get("servers/?page_size=2", token=operator).json()
    assert body["count"] == 3
    assert [s["slug"] for s in body["results"]] == ["github", "payroll"]
    assert body["results"][0]["tool_count"] == 2
    assert [s["slug"] for s in api.get("servers/?page=2&page_size=2", token=operator).json()["results"]] == ["zeta"]


def test_list_servers_by_status(api, catalog, operator):
    from tests.governance.factories import ServerFactory

    ServerFactory(slug="zeta", status="degraded")
    assert [s["slug"] for s in api.get("servers/?status=degraded", token=operator).json()["results"]] == ["zeta"]
    response = api.get("servers/?status=down", token=operator)
    assert response.status_code == 400
    assert error_of(response)["fields"] == {
        "status": ["must be one of: active, degraded, unavailable, disabled, archived"]
    }


def test_server_endpoints_need_model_permissions(api, catalog, member, grant):
    """A user who may discover a server's tools is not its operator."""
    token = make_token(member, ["api", "discover"])
    for method, path, body in [
        ("GET", "servers/", None),
        ("POST", "servers/", TIME_SERVER),
        ("GET", "servers/github/", None),
        ("PATCH", "servers/github/", {"name": "x"}),
        ("POST", "servers/github/archive/", None),
        ("POST", "servers/github/sync/", None),
    ]:
        response = api.request(method, path, token=token, json=body)
        assert response.status_code == 403, (method, path)
        assert error_of(response)["code"] == "permission_denied"
    catalog.github.refresh_from_db()
    assert catalog.github.status == "active" and catalog.github.name == "github"


def test_view_permission_does_not_allow_writes(api, catalog, member):
    member.is_staff = True  # model permissions act only for staff, as in the admin
    member.save()
    give_perms(member, "catalog.view_server")
    token = make_token(member, ["api"])
    assert api.get("servers/", token=token).status_code == 200
    assert api.patch("servers/github/", token=token, json={"name": "x"}).status_code == 403


def test_register_server(api, catalog, operator):
    from catalog.models import Server

    response = api.post("servers/", token=operator, json={**TIME_SERVER, "env_vars": ["TZ_HOME"]})
    assert response.status_code == 201, response.text
    assert response.json()["slug"] == "time" and response.json()["status"] == "active"
    assert Server.objects.get(slug="time").env_vars == ["TZ_HOME"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"slug": "a::b", "name": "x", "transport": "stdio", "command": "c"}, "slug"),
        ({"slug": "nocmd", "name": "x", "transport": "stdio"}, "command"),
        ({"slug": "nourl", "name": "x", "transport": "http"}, "url"),
        ({"slug": "github", "name": "dup", "transport": "stdio", "command": "c"}, "slug"),
        ({"slug": "badenv", "name": "x", "transport": "stdio", "command": "c", "env_vars": ["1BAD"]}, "env_vars"),
        ({"name": "x"}, "slug"),
    ],
)
def test_register_validation(api, catalog, operator, body, field):
    from catalog.models import Server

    before = Server.objects.count()
    response = api.post("servers/", token=operator, json=body)
    assert response.status_code == 400, response.text
    assert field in error_of(response)["fields"]
    assert Server.objects.count() == before


def test_a_slug_with_spaces_is_refused_with_a_suggestion(api, catalog, operator):
    from catalog.models import Server

    response = api.post("servers/", token=operator, json={**TIME_SERVER, "slug": "Clock Two"})
    assert response.status_code == 400, response.text
    message = " ".join(error_of(response)["fields"]["slug"])
    assert "Use only letters, digits, hyphens and underscores" in message and "'clock-two'" in message
    assert not Server.objects.filter(slug="Clock Two").exists()


def test_edit_server(api, catalog, operator):
    response = api.patch("servers/github/", token=operator, json={"name": "GitHub", "environment": "development"})
    assert response.status_code == 200
    assert response.json()["name"] == "GitHub" and response.json()["environment"] == "development"
    bad = api.patch("servers/github/", token=operator, json={"transport": "http", "url": ""})
    assert bad.status_code == 400 and "url" in error_of(bad)["fields"]
    catalog.github.refresh_from_db()
    assert catalog.github.transport == "imported"
    assert api.patch("servers/nope/", token=operator, json={"name": "x"}).status_code == 404


def test_archive_hides_tools_everywhere(api, catalog, operator, member):
    """Archived: out of the tools list, tool reads and search for everyone who could see them."""
    user = make_token(member, ["api", "discover"])
    assert api.get("tools/", token=user).json()["count"] == 1
    response = api.post("servers/github/archive/", token=operator)
    assert response.status_code == 200 and response.json()["status"] == "archived"
    assert api.get("tools/", token=user).json()["count"] == 0
    assert api.get(f"tools/{catalog.visible.tool_id}/", token=user).status_code == 404
    found = api.post("search/", token=user, json={"query": "list the issues of a repository"}).json()
    assert found["matches"] == []
    # Archiving twice is a no-op.
    assert api.post("servers/github/archive/", token=operator).json()["status"] == "archived"


def test_archived_server_is_never_synced_again(api, catalog, operator):
    from catalog.services.sync import server_list_syncable, server_sync

    # A live transport, so only its archived status keeps it from being synced.
    api.patch("servers/github/", token=operator, json={"transport": "stdio", "command": "/nonexistent/mcp"})
    assert catalog.github.pk in server_list_syncable()
    api.post("servers/github/archive/", token=operator)
    assert catalog.github.pk not in server_list_syncable()
    run = server_sync(server_pk=catalog.github.pk, trigger="test")
    assert (run.status, run.error) == ("skipped", "server is archived")
    catalog.github.refresh_from_db()
    assert catalog.github.status == "archived"


@pytest.mark.slow
def test_trigger_sync_returns_its_run(api, catalog, operator, owner):
    command = str(Path(sys.executable).parent / "mcp-server-time")  # installed from requirements.txt
    created = api.post(
        "servers/", token=operator, json={**TIME_SERVER, "command": command, "args": ["--local-timezone", "UTC"]}
    )
    assert created.status_code == 201, created.text
    response = api.post("servers/time/sync/", token=operator)
    assert response.status_code == 202, response.text
    body = response.json()
    assert body["trigger"].startswith("api:")
    run = body["sync_run"]
    assert run["status"] == "success" and run["server"] == "time" and run["added"] >= 1
    assert api.get("servers/time/", token=operator).json()["tool_count"] == run["added"]
    listed = api.get(f"sync-runs/?source={body['trigger']}", token=operator).json()
    assert [r["id"] for r in listed["results"]] == [run["id"]]
    # opsux11: the person the token acts for asked for it (their home's "Your recent actions" lists it).
    assert SyncRun.objects.get(pk=run["id"]).started_by == owner


def test_server_limited_token_sees_only_its_servers(api, catalog, owner):
    give_perms(owner, *OPERATOR_PERMS)
    token = make_token(owner, ["api", "server:payroll"])
    assert [s["slug"] for s in api.get("servers/", token=token).json()["results"]] == ["payroll"]
    assert api.get("servers/github/", token=token).status_code == 404
    assert api.post("servers/github/archive/", token=token).status_code == 404
    catalog.github.refresh_from_db()
    assert catalog.github.status == "active"
