"""A live gateway over HTTP for the gateway tests, real upstream servers, personas and tokens.

The gateway (``scoutsite.asgi.application``) runs under uvicorn in a background thread on a free 127.0.0.1
port, once per test session (the SDK's session manager runs once per app). Tests talk to it only over HTTP:
the SDK's in-memory client would skip authentication. Data is committed (``transaction=True``) so the
server sees it; with the in-memory SQLite test database the server shares the test connection, as
Django's LiveServerTestCase does.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import closing, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import anyio
import httpx
import httpx2
import pytest
import redis
import uvicorn
from asgiref.sync import sync_to_async
from django.db import connections
from django.utils import timezone
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

T = TypeVar("T")

REPO = Path(__file__).resolve().parents[2]
FAULTY_SERVER = Path(__file__).parent / "servers" / "faulty_server.py"
NODE_BIN = REPO / "tools" / "node_modules" / ".bin"
MODERN = "2026-07-28"
LEGACY = "legacy"  # the 2025-11-25 initialize handshake
PROTOCOL_MODES = [LEGACY, MODERN]

# Marks every gateway test: committed data. No serialized_rollback: mixed with other transactional tests it
# re-inserts content types that a flush already recreated (IntegrityError on Postgres); governance
# re-creates its seeded risk classes and policy version on demand instead.
gateway_db = pytest.mark.django_db(transaction=True)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


REDIS_SERVER = shutil.which("redis-server")


def manage_migrate(env: dict[str, str]) -> None:
    """``manage.py migrate`` in a process of its own, on the database ``env`` names (a throwaway secret key)."""
    subprocess.run(
        [sys.executable, str(REPO / "manage.py"), "migrate", "--verbosity", "0"],
        cwd=REPO,
        env={**env, "SECRET_KEY": "migrate-only"},
        check=True,
        timeout=300,
    )


# A SQLite database migrated once per test session, copied for each site of processes the tests start (the
# cross-process workers, `make run WORKERS=2`): a fresh `manage.py migrate` cost each some 4.5 s of CPU (40 s and more
# on a loaded machine) for the same tables.
_MIGRATED_SQLITE: dict[str, Path] = {}


def migrated_sqlite(target: Path, env: dict[str, str]) -> None:
    """Put a migrated SQLite database at ``target`` (nothing there yet); ``env`` runs the first migrate."""
    import atexit
    import sqlite3
    import tempfile

    if "template" not in _MIGRATED_SQLITE:
        folder = Path(tempfile.mkdtemp(prefix="scout-migrated-"))
        atexit.register(shutil.rmtree, folder, ignore_errors=True)
        template = folder / "scout.sqlite3"
        migrate_env = {key: value for key, value in env.items() if key not in ("DATABASE_URL", "SECRET_KEY_FILE")}
        manage_migrate({**migrate_env, "SQLITE_PATH": str(template)})
        with closing(sqlite3.connect(template)) as database:  # all of it in the one file copied
            database.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        _MIGRATED_SQLITE["template"] = template
    shutil.copyfile(_MIGRATED_SQLITE["template"], target)


POSTGRES = os.environ.get("DATABASE_URL", "").startswith(("postgres://", "postgresql://"))


def postgres_url(database: str) -> str:
    """DATABASE_URL's server, database ``database``."""
    from urllib.parse import urlsplit, urlunsplit

    return urlunsplit(urlsplit(os.environ["DATABASE_URL"])._replace(path=f"/{database}"))


# A Postgres database migrated once per test session, copied (CREATE DATABASE ... TEMPLATE) for each process of its
# own (gateways, the demo): a fresh migrate cost each one's start some 5 s of CPU for the same tables.
_POSTGRES_TEMPLATE: dict[str, str] = {}


def drop_postgres_database(name: str) -> None:
    import psycopg

    with psycopg.connect(postgres_url("postgres"), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


TEMPLATE_PREFIX = "scout_f7_template_"


def drop_templates_of_ended_sessions(admin: Any) -> None:
    """Drop the templates a killed test session left (its ``atexit`` never ran): those named after a process that
    is gone. Sessions running beside this one keep theirs."""
    rows = admin.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [TEMPLATE_PREFIX + "%"]).fetchall()
    for (name,) in rows:
        pid = name.removeprefix(TEMPLATE_PREFIX).split("_")[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def migrated_postgres(name: str) -> None:
    """Create the Postgres database ``name``, migrated: a copy of the session's template, migrated at first use."""
    import atexit
    import uuid

    import psycopg

    if "name" not in _POSTGRES_TEMPLATE:
        template = f"{TEMPLATE_PREFIX}{os.getpid()}_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(postgres_url("postgres"), autocommit=True) as admin:
            drop_templates_of_ended_sessions(admin)
            admin.execute(f'CREATE DATABASE "{template}"')
        atexit.register(drop_postgres_database, template)
        env = {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "TESTING")}
        manage_migrate({**env, "DATABASE_URL": postgres_url(template), "PYTHONPATH": str(REPO)})
        _POSTGRES_TEMPLATE["name"] = template
    with psycopg.connect(postgres_url("postgres"), autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}" TEMPLATE "{_POSTGRES_TEMPLATE["name"]}"')


class ThrowawayRedis:
    """A redis-server of this test's own, without persistence: started, stopped and restarted by its PID."""

    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = self.client()
        deadline = time.monotonic() + 30  # a loaded machine starts it slowly
        while time.monotonic() < deadline:
            try:
                client.ping()
                return
            except (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError):
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process is not None:
            self.process.terminate()
            self.process.wait(10)
            self.process = None

    def client(self) -> redis.Redis:
        return redis.Redis(host="127.0.0.1", port=self.port, socket_timeout=1)

    def keys(self) -> int:
        return self.client().dbsize()


class ThreadedUvicorn:
    """uvicorn serving one ASGI app from a background thread, with its own event loop."""

    def __init__(self, app: Any, *, log_config: Any = None) -> None:
        self.port = free_port()
        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=self.port,
            lifespan="on",
            log_level="info",
            access_log=True,
            log_config=log_config,
            timeout_graceful_shutdown=2,
            http="scoutsite.serving:BoundedH11Protocol",  # the run command's protocol
        )
        self.server = uvicorn.Server(config)
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        try:
            self.loop.run_until_complete(self.server.serve())
        finally:
            # Leave nothing pending (e.g. sse-starlette's shutdown watcher) to be destroyed at exit.
            pending = [task for task in asyncio.all_tasks(self.loop) if not task.done()]
            for task in pending:
                task.cancel()
            self.loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
            self.loop.run_until_complete(self.loop.shutdown_asyncgens())
            self.loop.close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> ThreadedUvicorn:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def run_sync_in_server(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` in the thread where the server's ORM work runs (asgiref's thread-sensitive executor)."""
        return asyncio.run_coroutine_threadsafe(sync_to_async(fn)(), self.loop).result(30)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(15)


# One list for the whole session: the shared gateway's log collector appends here whichever module's fixture
# definition started it (the browser journeys import these fixtures into their own modules).
_ACCESS_LOG: list[str] = []


@pytest.fixture(scope="session")
def access_log() -> list[str]:
    return _ACCESS_LOG


# One uvicorn per test session: the SDK's session manager runs once per app, and the browser journeys import
# these fixtures into their own modules (a second fixture definition), so every definition shares this one.
_SHARED_GATEWAY: dict[str, Any] = {}


@pytest.fixture(scope="session")
def live_gateway(django_db_setup, django_db_blocker, access_log: list[str]) -> Iterator[ThreadedUvicorn]:
    if _SHARED_GATEWAY:
        _SHARED_GATEWAY["users"] += 1
        yield _SHARED_GATEWAY["server"]
        _SHARED_GATEWAY["users"] -= 1
        if _SHARED_GATEWAY["users"] == 0:
            _SHARED_GATEWAY.pop("stop")()
        return

    from scoutsite.asgi import application

    class _Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            access_log.append(record.getMessage())

    collector = _Collect(level=logging.INFO)
    for name in ("uvicorn.access", "uvicorn.error"):
        logging.getLogger(name).addHandler(collector)
    server = ThreadedUvicorn(application, log_config=None).start()
    with django_db_blocker.unblock():
        connection = connections["default"]
        if connection.vendor == "sqlite" and connection.is_in_memory_db():
            # One in-memory database: the server thread must use this very connection (as LiveServerTestCase).
            connection.inc_thread_sharing()

            def share() -> None:
                connections["default"] = connection

            server.run_sync_in_server(share)

    def stop() -> None:
        with django_db_blocker.unblock():
            if not (connection.vendor == "sqlite" and connection.is_in_memory_db()):
                server.run_sync_in_server(connections.close_all)  # or the test database cannot be dropped
            server.stop()
        for name in ("uvicorn.access", "uvicorn.error"):
            logging.getLogger(name).removeHandler(collector)
        _SHARED_GATEWAY.clear()

    _SHARED_GATEWAY.update(server=server, users=1, stop=stop)
    yield server
    _SHARED_GATEWAY["users"] -= 1
    if _SHARED_GATEWAY["users"] == 0:
        _SHARED_GATEWAY.pop("stop")()


@pytest.fixture
def gateway(live_gateway: ThreadedUvicorn, transactional_db, settings) -> ThreadedUvicorn:
    """The live gateway for one test, with a clean slate of settings and search state."""
    from scoutsite.asgi import mcp_server
    from search.backends import backend_get

    settings.SCOUT_PUBLIC_URL = live_gateway.url
    settings.SCOUT_MCP_RATE = "100000/minute"  # some tests send many requests with one token (test_rate_limit: its own)
    forget_cached_state()
    yield live_gateway
    backend_get().reset()
    # Upstream sessions belong to this test's servers and environment: close them.
    asyncio.run_coroutine_threadsafe(mcp_server.pool.close_all(), live_gateway.loop).result(10)


def run_checks(subtests: Any, checks: list[tuple[Callable[..., None], list[str]]], *world: Any) -> None:
    """Each check of ``checks`` (a function and the protocol modes it runs in) on one shared world, each judged on
    its own: a subtest named after the check, per mode. An empty list, or a check with no mode, is refused: the
    test would pass having checked nothing."""
    assert checks and all(modes for _, modes in checks), "run_checks was given nothing to run"
    for check, modes in checks:
        for mode in modes:
            with subtests.test(check.__name__.strip("_"), mode=mode):
                check(*world, mode)


def run(make: Callable[[], Awaitable[T]]) -> T:
    """Run async client code from a (sync) test."""
    return anyio.run(make)


# --- people and tokens ----------------------------------------------------------------------------


class Persona(NamedTuple):
    user: Any
    token: str


def admin_pages(base_url: str, username: str, *paths: str) -> list[httpx.Response]:
    """The admin pages at ``paths`` as ``username`` (a ``make_user`` person) reads them, logged in over HTTP."""
    with httpx.Client(base_url=base_url, timeout=30) as browser:
        login_page = browser.get("/admin/login/")
        csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', login_page.text).group(1)
        browser.post(
            "/admin/login/?next=/admin/",
            data={"username": username, "password": f"pw-{username}-123", "csrfmiddlewaretoken": csrf},
        )
        return [browser.get(path) for path in paths]


def make_user(username: str, **extra: Any) -> Any:
    from django.contrib.auth import get_user_model

    return get_user_model().objects.create_user(username=username, password=f"pw-{username}-123", **extra)


def make_token(user: Any, scopes: list[str] | None = None, **extra: Any) -> str:
    from governance.services.tokens import api_token_create

    _, raw = api_token_create(
        user=user,
        name=f"{user.username} test token",
        scopes=scopes or ["discover", "execute"],
        expires_at=timezone.now() + timedelta(hours=1),
        **extra,
    )
    return raw


@pytest.fixture
def admin_user(transactional_db) -> Any:
    return make_user("gw_admin", is_staff=True, is_superuser=True)


@pytest.fixture
def member_on(gateway, admin_user) -> Callable[..., Persona]:
    """``member_on(*targets, index=False)``: a new member ("gw_member") who may discover and execute on each of
    ``targets`` (servers or tools), with a token; ``index=True`` builds the search index after the grants. The
    person most gateway tests call as."""

    def make(*targets: Any, index: bool = False) -> Persona:
        member = make_user("gw_member")
        for target in targets:
            grant(admin_user, target, member, "discover", "execute")
        if index:
            build_index()
        return Persona(member, make_token(member))

    return make


@pytest.fixture
def people(member_on, admin_user, time_server, calc_server) -> dict[str, Any]:
    """Tokens of a member, who may use the time server and calc::add (not calc's hidden payroll tool), and of an
    approver, who may use all of calc; the index built. Modules with other personas define their own."""
    from catalog.models import Tool

    member = member_on(time_server, Tool.objects.get(tool_id="calc::add"))
    approver = make_user("gw_approver")
    grant(admin_user, calc_server, approver, "discover", "execute")
    build_index()
    return {"member": member.token, "approver": make_token(approver)}


def low_risk() -> Any:
    """The seeded "low" risk class (re-created on demand: flushes between transactional tests drop seeds)."""
    from governance.services.policy import _risk_class

    return _risk_class("low")


def grant(admin_user: Any, target: Any, holder: Any, *actions: str) -> None:
    from governance.services.permissions import permission_grant

    for action in actions:
        permission_grant(actor=admin_user, target=target, action=action, holder=holder)


# --- upstream servers -----------------------------------------------------------------------------


def git_repo(path: Path) -> Path:
    """A git repository at ``path`` with one commit of a README (mcp-server-git needs a commit to log and diff)."""
    path.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    (path / "README.md").write_text("hello\n")
    subprocess.run(["git", "-C", str(path), "add", "README.md"], check=True)
    subprocess.run(
        ["git", "-C", str(path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one"], check=True
    )
    return path


def demo_git_server(path: Path) -> tuple[Any, Path]:
    """mcp-server-git over a new repository at ``path`` (``git_repo``), synced, with the note the demo gives its
    git server (which repository ``repo_path`` names)."""
    repo = git_repo(path)
    server = sync_server(
        slug="git",
        transport="stdio",
        command="mcp-server-git",
        args=["--repository", str(repo)],
        description=f"Git operations on the demo repository {repo}.",
    )
    return server, repo


def sync_server(**fields: Any) -> Any:
    """Register an upstream server (or complete one registered already by its slug) and sync its real listing
    through the catalog.

    The first two syncs of a new server with these ``fields`` (and environment) in the session are real ones, and
    the rows the second added are kept; a later test registering the same server anew gets those rows back
    (``_synced_restore``) instead of spawning and listing the same upstream again. A server registered already is
    always synced for real."""
    from catalog.models import Server
    from catalog.services.sync import server_sync

    key = _synced_key(fields)
    fresh = not Server.objects.filter(slug=fields["slug"]).exists()
    if fresh:
        restored = _synced_restore(key, fields["slug"])
        if restored is not None:
            return restored
    # Rows read only from a server's second sync on: most of one test's own (a tmp_path script) are synced once.
    before = _rows_now() if fresh and key in _SEEN and key not in _SYNCED else None
    _SEEN.add(key)
    server, _ = Server.objects.update_or_create(slug=fields["slug"], defaults={"name": fields["slug"], **fields})
    run_ = server_sync(server_pk=server.pk, trigger="test")
    server.refresh_from_db()
    assert run_.status in ("success", "partial"), (run_.status, run_.error)
    assert server.tools.exists(), f"{server.slug}: no tools synced"
    if before is not None:
        _SYNCED[key] = _rows_added(before, _rows_now())
    return server


# What a real sync_server added, by its arguments (``_rows_added``), or None when that sync changed or deleted rows it
# found (then every sync of that server is a real one).
_SYNCED: dict[str, Any] = {}
_SEEN: set[str] = set()

# Environment variables that name where an upstream writes (its calls, its memory), not what it lists: their values
# (a path under each test's tmp_path) are left out of the key. Every other variable a server names is in it.
_WRITE_ONLY_ENV = frozenset({"FAULTY_CALL_LOG", "POISONED_CALL_LOG", "STUFFING_CALL_LOG", "MEMORY_FILE_PATH"})


class _Added(NamedTuple):
    rows: list[tuple[Any, list[dict[str, Any]]]]  # (model, its new rows' field values)
    # (model, row index, foreign key attname, target model, {unique field: value}): keys to rows the sync found
    # (a seeded risk class), looked up again at each restore, since each test re-creates them under other keys.
    refs: list[tuple[Any, int, str, Any, dict[str, Any]]]


def _synced_key(fields: dict[str, Any]) -> str:
    """The server's arguments and environment, and what else a sync reads: the catalog it joins (a tool copying
    another server's is held) and Scout's settings (a test's ``settings``)."""
    from django.conf import settings

    from catalog.models import Server, Tool

    env = {name: os.environ.get(name) for name in fields.get("env_vars") or [] if name not in _WRITE_ONLY_ENV}
    catalog = [
        sorted(Server.objects.values_list("slug", "status")),
        sorted(Tool.objects.values_list("tool_id", "definition_hash")),
    ]
    scout = {name: getattr(settings, name) for name in dir(settings) if name.startswith("SCOUT_")}
    return json.dumps([fields, env, catalog, scout], sort_keys=True, default=str)


def _stored_models() -> list[Any]:
    from django.apps import apps

    return [
        model for model in apps.get_models(include_auto_created=True) if model._meta.managed and not model._meta.proxy
    ]


def _rows_now() -> dict[Any, dict[Any, dict[str, Any]]]:
    """Every row of every table, by model and primary key (a test's database is small)."""
    rows: dict[Any, dict[Any, dict[str, Any]]] = {}
    for model in _stored_models():
        names = [field.attname for field in model._meta.concrete_fields]
        rows[model] = {row[model._meta.pk.attname]: row for row in model._base_manager.values(*names)}
    return rows


def _natural_key(model: Any, row: dict[str, Any]) -> dict[str, Any] | None:
    """A lookup finding ``row`` again by a unique field (or fields) other than its primary key."""
    from django.db.models import UniqueConstraint

    meta = model._meta
    candidates = [[field.name] for field in meta.concrete_fields if field.unique and not field.primary_key]
    candidates += [list(names) for names in meta.unique_together]
    candidates += [
        list(constraint.fields)
        for constraint in meta.constraints
        if isinstance(constraint, UniqueConstraint) and constraint.fields and constraint.condition is None
    ]
    for names in candidates:
        attnames = [meta.get_field(name).attname for name in names]
        return {attname: row[attname] for attname in attnames}
    return None


def _rows_added(before: dict[Any, dict[Any, Any]], after: dict[Any, dict[Any, Any]]) -> _Added | None:
    """The rows in ``after`` that ``before`` lacks; None when a row of ``before`` changed or went (the sync's
    invalidation token aside, which a restore writes anew), or one added refers to a row found that no unique
    field names."""
    from governance.models import VisibilityVersion

    added: list[tuple[Any, list[dict[str, Any]]]] = []
    for model, rows in after.items():
        old = before[model]
        if model is not VisibilityVersion and any(rows.get(pk) != row for pk, row in old.items()):
            return None
        new = [row for pk, row in rows.items() if pk not in old]
        if new:
            added.append((model, new))
    refs = []
    for model, rows in added:
        for field in model._meta.concrete_fields:
            if not field.is_relation or field.related_model is None:
                continue
            target = field.related_model._meta.concrete_model
            for index, row in enumerate(rows):
                value = row[field.attname]
                if value is None or value not in before[target]:
                    continue  # none, or a row added too (restored under the same key)
                if not field.target_field.primary_key:
                    return None
                lookup = _natural_key(target, before[target][value])
                if lookup is None:
                    return None
                refs.append((model, index, field.attname, target, lookup))
    return _Added(added, refs)


def _synced_restore(key: str, slug: str) -> Any:
    """Insert the rows a real sync of this server added earlier in the session, with their own keys (sequences are
    not reset by a flush, so no later row took them) and raw as loaddata does, pointing at this test's rows where
    they referred to rows the sync found; None when there are none, or they clash with rows this test has."""
    from django.db import IntegrityError, transaction

    from catalog.models import Server

    added = _SYNCED.get(key)
    if not added:
        return None
    rows = {model: [dict(row) for row in values] for model, values in added.rows}
    for model, index, attname, target, lookup in added.refs:
        found = target._base_manager.filter(**lookup).values_list("pk", flat=True).first()
        if found is None:
            return None
        rows[model][index][attname] = found
    try:
        with transaction.atomic():
            for model, values in rows.items():
                pk = model._meta.pk.attname
                if model._base_manager.filter(pk__in=[row[pk] for row in values]).exists():
                    raise IntegrityError(f"{model.__name__}: a row kept from a sync is there already")
                for row in values:
                    model(**row).save_base(raw=True, force_insert=True)
    except IntegrityError:
        return None
    forget_cached_state()  # as the sync's own writes invalidated the visible sets and the index generation
    return Server.objects.get(slug=slug)


def sync_scripted_server(tmp_path: Path, slug: str, script: dict[str, Any]) -> Any:
    """A scripted stdio upstream (``tests/catalog/servers/scripted_stdio.py``: raw JSON-RPC, every byte of its
    listing and call answer set by ``script``) registered as ``slug`` and synced."""
    from tests.catalog.servers.fixtures import SCRIPTED

    path = tmp_path / f"{slug}.json"
    path.write_text(json.dumps(script))
    return sync_server(slug=slug, transport="stdio", command=sys.executable, args=[str(SCRIPTED), str(path)])


def scripted_read_tool(
    tmp_path: Path, slug: str, tool: dict[str, Any], result: dict[str, Any], *, member_on: Any, admin_user: Any
) -> tuple[str, Path]:
    """A scripted stdio upstream ``slug`` whose one tool ``tool``, classified a low-risk reversible read, answers
    every call with ``result``: a new member's token for it and the upstream's call log (one line a call)."""
    from tests.catalog.servers.fixtures import scripted_result

    log = tmp_path / "calls.jsonl"
    script = {"pages": [[tool]], "call_reply": scripted_result(result), "call_log": str(log)}
    server = sync_scripted_server(tmp_path, slug, script)
    classify_low_risk(server.tools.get(), actor=admin_user, operation_class="read", reversibility="reversible")
    return member_on(server).token, log


def sync_script_server(slug: str, script: str, env_var: str) -> Any:
    """``sync_server`` for one of tests/mcpgateway/servers/ over stdio, passed the environment variable
    ``env_var`` (where the script logs its calls)."""
    path = Path(__file__).parent / "servers" / script
    return sync_server(slug=slug, transport="stdio", command=sys.executable, args=[str(path)], env_vars=[env_var])


@pytest.fixture
def time_server(transactional_db) -> Any:
    return sync_server(slug="time", transport="stdio", command="mcp-server-time", args=["--local-timezone", "UTC"])


@pytest.fixture
def faulty_call_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "faulty-calls.log"
    monkeypatch.setenv("FAULTY_CALL_LOG", str(path))
    return path


def faulty_calls(path: Path, name: str) -> int:
    if not path.exists():
        return 0
    return sum(1 for line in path.read_text().splitlines() if line.split()[-1] == name)


@pytest.fixture
def faulty_server(transactional_db, faulty_call_log: Path) -> Any:
    return sync_server(
        slug="faulty",
        transport="stdio",
        command=sys.executable,
        args=[str(FAULTY_SERVER)],
        env_vars=["FAULTY_CALL_LOG"],
    )


def node_server(name: str) -> Path:
    """The npm reference server ``name``'s binary; the test skipped (failed under SCOUT_REQUIRE_NODE_TOOLS) when
    the Node tools are not installed."""
    binary = NODE_BIN / name
    if not binary.exists():
        if os.environ.get("SCOUT_REQUIRE_NODE_TOOLS"):
            pytest.fail(f"{binary} is missing and SCOUT_REQUIRE_NODE_TOOLS is set: run `make install`")
        pytest.skip(f"{binary} is missing: run `make install` (npm reference servers)")
    return binary


@pytest.fixture
def memory_server(transactional_db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    binary = node_server("mcp-server-memory")
    monkeypatch.setenv("MEMORY_FILE_PATH", str(tmp_path / "memory.jsonl"))
    return sync_server(slug="memory", transport="stdio", command=str(binary), env_vars=["MEMORY_FILE_PATH"])


@pytest.fixture
def everything_server(transactional_db) -> Any:
    """server-everything (echo, get-sum, get-env ...), synced over stdio."""
    return sync_server(
        slug="everything", transport="stdio", command=str(node_server("mcp-server-everything")), args=["stdio"]
    )


def build_http_upstream() -> Any:
    """A Streamable HTTP upstream built with MCPServer: arithmetic, plus an admin tool tests hide."""
    from mcp.server.mcpserver import MCPServer
    from mcp_types import ToolAnnotations

    upstream = MCPServer("calc")
    read_only = ToolAnnotations(readOnlyHint=True, destructiveHint=False)

    @upstream.tool(annotations=read_only)
    def add(a: int, b: int) -> int:
        """Add two integers and return the sum."""
        return a + b

    @upstream.tool(annotations=read_only)
    def rotate_payroll_encryption_keys(environment: str) -> str:
        """Rotate the payroll database encryption keys for an environment (payroll key rotation)."""
        return f"rotated {environment}"

    return upstream.streamable_http_app(stateless_http=False)


@pytest.fixture(autouse=True)
def local_upstreams(loopback_upstreams):
    """The gateway's tests talk to upstreams on this machine (the session's HTTP servers, the faulty one)."""


@pytest.fixture(scope="session")
def http_upstream() -> Iterator[ThreadedUvicorn]:
    server = ThreadedUvicorn(build_http_upstream()).start()
    yield server
    server.stop()


@pytest.fixture
def calc_server(transactional_db, http_upstream: ThreadedUvicorn) -> Any:
    return sync_server(slug="calc", transport="http", url=f"{http_upstream.url}/mcp")


# --- search index ---------------------------------------------------------------------------------


def forget_cached_state() -> None:
    """Process caches that outlive a flushed test database: the index generation and visible sets."""
    from governance.cache import visibility_invalidate
    from search.backends import backend_get
    from search.selectors import generation_token_forget

    generation_token_forget()
    visibility_invalidate()
    backend_get().reset()


def build_index() -> None:
    from search.services import index_rebuild

    index_rebuild()
    forget_cached_state()


def drop_index() -> None:
    """No search index at all (as on a fresh install before the first build)."""
    from search.models import IndexGeneration

    IndexGeneration.objects.all().delete()
    forget_cached_state()


# --- MCP and raw HTTP clients ---------------------------------------------------------------------


def mcp_client(gateway: ThreadedUvicorn, token: str, mode: str = LEGACY) -> Client:
    http_client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    return Client(streamable_http_client(f"{gateway.url}/mcp", http_client=http_client), mode=mode)


def execute_once(gateway: ThreadedUvicorn, token: str, tool_id: str, arguments: dict[str, Any] | None = None) -> Any:
    """The answer to one ``execute_tool`` of ``tool_id`` over HTTP, as the SDK client reads it."""

    async def main() -> Any:
        async with mcp_client(gateway, token) as client:
            return await client.call_tool("execute_tool", {"tool_id": tool_id, "arguments": arguments or {}})

    return run(main)


def scripted_answer(
    gateway: ThreadedUvicorn, tmp_path: Path, tool_id: str, result: dict[str, Any], *, member_on: Any, admin_user: Any
) -> Any:
    """The answer to one ``execute_tool`` of ``tool_id`` ("slug::name") over HTTP, by a new member, on a scripted
    stdio upstream (``scripted_read_tool``) answering ``result``, with no index (the tool listed directly); the
    upstream is asserted to have been called exactly once."""
    from tests.catalog.servers.fixtures import good_tool

    slug, name = tool_id.split("::")
    token, log = scripted_read_tool(tmp_path, slug, good_tool(name), result, member_on=member_on, admin_user=admin_user)
    drop_index()
    answer = execute_once(gateway, token, tool_id)
    assert len(log.read_text().splitlines()) == 1
    return answer


@contextmanager
def uvicorn_lines() -> Iterator[list[str]]:
    """The messages uvicorn's access and error loggers write meanwhile, collected by a handler of this block's own:
    another server started in the session (with uvicorn's default logging config) may have replaced the
    session-wide handlers."""
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    collector = Collect(level=logging.INFO)
    loggers = [logging.getLogger(name) for name in ("uvicorn.access", "uvicorn.error")]
    saved = [(logger.level, logger.disabled) for logger in loggers]
    for logger in loggers:
        logger.addHandler(collector)
        logger.setLevel(logging.INFO)
        logger.disabled = False
    try:
        yield lines
    finally:
        for logger, (level, disabled) in zip(loggers, saved, strict=True):
            logger.removeHandler(collector)
            logger.setLevel(level)
            logger.disabled = disabled


def wait_for_access_line(lines: list[str], request: str, status: str) -> None:
    """Wait (bounded) for the access line of ``request`` ("GET /path") answered ``status``: it is written after the
    response, so a check on the log runs on it rather than passing on a log not yet written."""
    deadline = time.monotonic() + 60
    while not any(request in line and status in line for line in lines):
        assert time.monotonic() < deadline, f"uvicorn never logged {request} {status}"
        time.sleep(0.05)


def challenge_params(response: httpx.Response) -> dict[str, str]:
    """The parameters of a 401's ``WWW-Authenticate: Bearer k="v", ...`` challenge, checked to be a Bearer one."""
    challenge = response.headers["www-authenticate"]
    assert challenge.startswith("Bearer "), challenge
    return dict(re.findall(r'(\w+)="([^"]*)"', challenge))


METADATA_PATH = "/.well-known/oauth-protected-resource/mcp"


def raw_post(
    gateway: ThreadedUvicorn,
    body: Any,
    *,
    token: str | None = None,
    headers: dict[str, str] | None = None,
    protocol: str = MODERN,
    raw: bytes | None = None,
) -> httpx.Response:
    """One POST to /mcp as a 2026-07-28 client would send it (no session needed)."""
    sent = {
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": protocol,
    }
    if token:
        sent["Authorization"] = f"Bearer {token}"
    if isinstance(body, dict) and "method" in body:
        sent["Mcp-Method"] = body["method"]
        name = (body.get("params") or {}).get("name")
        if body["method"] == "tools/call" and isinstance(name, str) and name.isascii() and name.isprintable():
            sent["Mcp-Name"] = name
    sent.update(headers or {})
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx.post(f"{gateway.url}/mcp", content=content, headers=sent, timeout=60)


def modern_request(method: str, params: dict[str, Any] | None = None, request_id: int = 1) -> dict[str, Any]:
    """A 2026-07-28 JSON-RPC request: the envelope carries protocol version and client info in ``_meta``."""
    meta = {
        "io.modelcontextprotocol/protocolVersion": MODERN,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "raw-test", "version": "1"},
    }
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": {**(params or {}), "_meta": meta}}


def rpc_result(response: httpx.Response) -> dict[str, Any]:
    """The JSON-RPC message of a response, whether sent as JSON or as one SSE event."""
    text = response.text
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
        messages = [json.loads(item) for item in data]
        return next(m for m in messages if "result" in m or "error" in m)
    return json.loads(text)


def unknown_tool_text(result: Any) -> str | None:
    """The text of a meta-tool's answer to an unknown or hidden tool_id (a tool error marked ``unknown_tool``, which
    the model reads), or None when ``result`` is any other answer."""
    if not getattr(result, "is_error", False) or result.structured_content != {"unknown_tool": True}:
        return None
    return "".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def classify_low_risk(
    tool: Any, *, actor: Any, operation_class: str, reversibility: str, environments: tuple[str, ...] = ()
) -> Any:
    """An admin's classification of ``tool`` at the seeded low risk class, with no data classes (the policy tests
    vary the rest)."""
    from governance.services.policy import tool_policy_classify, tool_policy_ensure

    return tool_policy_classify(
        policy=tool_policy_ensure(tool=tool),
        actor=actor,
        operation_class=operation_class,
        reversibility=reversibility,
        risk_class=low_risk(),
        allowed_environments=list(environments),
        data_classes=[],
    )
