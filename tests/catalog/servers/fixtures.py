"""Fixtures for tests that sync from real MCP servers. Imported into tests/catalog/conftest.py."""

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from django.core.cache import cache

from catalog.choices import Transport
from catalog.models import Server
from catalog.services.sync import server_sync_lock_name
from catalog.tasks import RESYNC_MARKER_PREFIX

from .http_mcp import RunningServer, serve_http

BIN_DIR = Path(sys.executable).parent
SCRIPTED = Path(__file__).with_name("scripted_stdio.py")


def good_tool(name: str, **extra: object) -> dict:
    return {"name": name, "description": f"The {name} tool.", "inputSchema": {"type": "object"}, **extra}


def scripted_result(result: dict) -> str:
    """A scripted upstream's ``call_reply``: the JSON-RPC answer carrying ``result`` under the request's own id."""
    return json.dumps({"jsonrpc": "2.0", "id": "ID", "result": result}).replace('"ID"', "ID")


def shared_reference_bomb(depth: int) -> dict:
    """A schema of ``depth`` definitions, each an anyOf of two references to the one before: a few lines that
    jsonschema evaluates once per path to the innermost string rule, 2**depth times for a string that fails it."""
    definitions: dict[str, dict] = {"level0": {"type": "string", "minLength": 5}}
    for level in range(1, depth + 1):
        twice = [{"$ref": f"#/$defs/level{level - 1}"}] * 2
        definitions[f"level{level}"] = {"anyOf": twice}
    return {"type": "object", "properties": {"code": {"$ref": f"#/$defs/level{depth}"}}, "$defs": definitions}


@pytest.fixture
def make_server(db) -> Callable[..., Server]:
    """Create a server; clears any debounce marker or lock left in a shared cache under its pk."""

    def make(slug: str = "upstream", **fields: object) -> Server:
        fields.setdefault("name", slug.title())
        server = Server.objects.create(slug=slug, **fields)
        cache.delete(f"{RESYNC_MARKER_PREFIX}{server.pk}")
        cache.delete(f"scout:lock:{server_sync_lock_name(server.pk)}")
        if os.environ.get("REDIS_URL"):
            import redis

            with redis.Redis.from_url(os.environ["REDIS_URL"]) as client:
                client.delete(f"scout:lock:{server_sync_lock_name(server.pk)}")
        return server

    return make


@pytest.fixture
def scripted(tmp_path: Path, make_server) -> Callable[..., tuple[Server, Callable[[dict], None]]]:
    """A scripted stdio server and a function that rewrites its script (read on every request)."""

    def make(script: dict, slug: str = "scripted") -> tuple[Server, Callable[[dict], None]]:
        path = tmp_path / f"{slug}.json"

        def write(new_script: dict) -> None:
            path.write_text(json.dumps(new_script))

        write(script)
        server = make_server(slug, transport=Transport.STDIO, command=sys.executable, args=[str(SCRIPTED), str(path)])
        return server, write

    return make


@pytest.fixture
def git_repo(tmp_path: Path) -> Path:
    """A real git repository with one commit."""
    repo = tmp_path / "repo"
    repo.mkdir()
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "Scout test",
        "GIT_AUTHOR_EMAIL": "test@localhost",
        "GIT_COMMITTER_NAME": "Scout test",
        "GIT_COMMITTER_EMAIL": "test@localhost",
    }
    (repo / "README.md").write_text("# test\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "add", "README.md"], cwd=repo, check=True, env=env)
    subprocess.run(["git", "commit", "-q", "-m", "Initial commit"], cwd=repo, check=True, env=env)
    return repo


@pytest.fixture
def http_upstream(loopback_upstreams) -> Iterator[RunningServer]:
    with serve_http() as running:
        yield running
