"""`manage.py demo` (what `make demo` runs before serving): real servers synced, granted, curated, indexed."""

import os
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from catalog.choices import ServerStatus
from catalog.models import Server, Tool
from governance.principals import principal_for_user
from governance.services.tokens import api_token_verify
from mcpgateway.services import gateway_search

from .conftest import (
    MODERN,
    NODE_BIN,
    POSTGRES,
    drop_postgres_database,
    free_port,
    migrated_postgres,
    modern_request,
    postgres_url,
    rpc_result,
)
from .test_database_lock import GRANT_TABLES, TableLock

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


@pytest.fixture(autouse=True)
def demo_env():
    """The demo sets MEMORY_FILE_PATH and SCOUT_PUBLIC_URL in this process's environment, for the server it becomes:
    put them back, or the processes later tests start (gateways, workers) inherit the demo's address and file."""
    names = ("MEMORY_FILE_PATH", "SCOUT_PUBLIC_URL")
    before = {name: os.environ.get(name) for name in names}
    yield
    for name, value in before.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


def test_demo_sets_up_real_servers_a_login_a_token_and_a_curated_index(tmp_path, settings, client, monkeypatch):
    if not (NODE_BIN / "mcp-server-memory").exists() and not os.environ.get("SCOUT_REQUIRE_NODE_TOOLS"):
        pytest.skip("tools/node_modules is not installed (make install); the demo syncs npm servers too")
    monkeypatch.delenv("SCOUT_PUBLIC_URL", raising=False)
    out = StringIO()
    call_command("demo", "--no-serve", "--port", "8799", "--data-dir", str(tmp_path), stdout=out)
    printed = out.getvalue()

    # Served on another port (make demo PORT=8799), the links Scout gives name that port, not 8000.
    assert "MCP:      http://127.0.0.1:8799/mcp" in printed
    assert settings.SCOUT_PUBLIC_URL == "http://127.0.0.1:8799"
    # ... and so does the server the command becomes (a fresh interpreter reading the environment).
    assert os.environ["SCOUT_PUBLIC_URL"] == "http://127.0.0.1:8799"
    assert "http://127.0.0.1:8799/mcp" in client.get("/").content.decode()

    for slug in ("time", "git", "memory", "everything"):
        server = Server.objects.get(slug=slug)
        assert server.status == ServerStatus.ACTIVE, (slug, server.last_error)
        assert Tool.objects.filter(server=server, removed_at__isnull=True).exists()
    assert Tool.objects.filter(tool_id="time::get_current_time").exists()
    assert Tool.objects.filter(tool_id="git::git_log").exists()

    admin = get_user_model().objects.get(username="admin")
    assert admin.is_superuser and "login: admin / " in printed
    # A login per role, printed: each opens its role's admin home with the password shown.
    for username, home in (("curator", "curator-home"), ("operator", "operator-home"), ("approver", "approver-home")):
        password = printed.split(f"login: {username} / ", 1)[1].split()[0]
        assert client.login(username=username, password=password), username
        html = client.get("/admin/").content.decode()
        assert f'id="{home}"' in html, username
        client.logout()
    token = next(word for word in printed.split() if word.startswith("scout_"))
    principal = api_token_verify(token)
    assert principal is not None and principal.user == admin

    # The admin's agent sees the granted demo servers, and the curated example lifts the memory tool.
    answer = gateway_search(principal=principal_for_user(admin), query="remember that alice works at acme", client=None)
    assert answer.matches and answer.matches[0]["tool_id"] == "memory::create_entities"
    # git_status's upstream text ("Shows the working tree status") says nothing of changed files: its curated
    # purpose does, so a request in those words finds it.
    for query in ("list files changed but not committed", "which files did I modify"):
        answer = gateway_search(principal=principal_for_user(admin), query=query, client=None)
        assert answer.matches and answer.matches[0]["tool_id"] == "git::git_status", query


def test_demo_runs_again_over_an_example_request_listed_twice():
    """A curator of an older version could list an example twice: `make demo` again must not stop on it."""
    from catalog.models import ToolExample
    from mcpgateway.management.commands.demo import Command
    from tests.governance.factories import ServerFactory, ToolFactory

    tool = ToolFactory(server=ServerFactory(slug="git"), name="git_log")
    for _ in range(2):
        ToolExample.objects.create(tool=tool, text="show me the latest commits")
    Command()._curate()
    tool.refresh_from_db()
    texts = sorted(tool.examples.values_list("text", flat=True))
    assert texts == ["show me the latest commits"] * 2 + ["who changed the repository recently"]
    assert tool.purpose == "Show the history of recent commits."


def test_a_demo_start_over_its_own_set_up_writes_no_grant_and_no_curation_again():
    """`make demo` again changes nothing of what the last start set up, and writes nothing for it: every start
    audited each grant again ("approver already had approve on git", 12 rows a start) and curated every tool again
    (a new curation time and an index update for each). The first start's grants are audited, once."""
    from catalog.models import ToolExample
    from governance.choices import AuditEventType
    from governance.models import AuditEvent
    from governance.roles import APPROVERS
    from mcpgateway.management.commands.demo import Command
    from tests.governance.factories import ServerFactory, ToolFactory

    demo = Command()
    demo._login("admin", superuser=True)
    demo._login("approver", superuser=False, role=APPROVERS)
    servers = [ServerFactory(slug="git"), ServerFactory(slug="memory")]
    log = ToolFactory(server=servers[0], name="git_log")
    create = ToolFactory(server=servers[1], name="create_entities")
    ToolExample.objects.create(tool=create, text="keep a note about a new project and who owns it")  # retired
    demo._grant(servers)
    demo._curate()
    grants = list(AuditEvent.objects.filter(event_type=AuditEventType.GRANT).values_list("payload", flat=True))
    assert len(grants) == 6 and all(payload["changed"] for payload in grants)
    first = {tool.pk: tool.curated_at for tool in (log, create) if not tool.refresh_from_db()}
    assert all(first.values())
    events = AuditEvent.objects.count()

    demo._grant(servers)
    demo._curate()
    assert AuditEvent.objects.count() == events
    for tool in (log, create):
        tool.refresh_from_db()
        assert tool.curated_at == first[tool.pk], tool.tool_id
    assert not create.examples.filter(text__startswith="keep a note").exists()
    assert create.negative_examples.filter(text="who works at a company").exists()


def test_ctrl_c_while_the_demo_sets_up_ends_it_with_a_line_and_serves_nothing(tmp_path, monkeypatch):
    """Ctrl-C during the demo's sync printed a KeyboardInterrupt traceback through the SDK and anyio's frames."""
    from django.core.management.base import CommandError

    from mcpgateway.management.commands.demo import Command

    def interrupted(**_):
        raise KeyboardInterrupt

    monkeypatch.setattr("catalog.services.sync.server_sync", interrupted)
    monkeypatch.setattr(Command, "_serve", lambda *_: pytest.fail("served after an interrupt"))
    with pytest.raises(CommandError, match="interrupted before the demo was ready; nothing is served") as raised:
        try:
            call_command("demo", "--port", str(free_port()), "--data-dir", str(tmp_path), stdout=StringIO())
        except KeyboardInterrupt:
            pytest.fail("the interrupt escaped the command: Python prints its traceback")
    assert raised.value.returncode == 130  # as a shell reports a command ended by SIGINT


def test_the_demo_refuses_a_port_in_use_before_it_changes_anything(tmp_path, monkeypatch):
    """A second `make demo` on the port of a running one reset every password, printed "Scout demo is ready" and
    then failed to bind ("address already in use")."""
    import socket

    from django.core.management.base import CommandError

    from mcpgateway.management.commands.demo import Command

    monkeypatch.setattr(Command, "_serve", lambda *_: pytest.fail("set up, then tried to serve on a port in use"))
    with socket.socket() as running:
        running.bind(("127.0.0.1", 0))
        running.listen()
        port = running.getsockname()[1]
        with pytest.raises(CommandError, match=rf"http://127.0.0.1:{port} is in use .* Nothing was changed"):
            call_command("demo", "--port", str(port), "--data-dir", str(tmp_path), stdout=StringIO())
    assert not get_user_model().objects.filter(username="admin").exists()


def test_demo_refuses_to_serve_debug_pages_beyond_loopback(settings, tmp_path):
    from django.core.management.base import CommandError

    settings.DEBUG = True
    with pytest.raises(CommandError, match="debug pages"):
        call_command("demo", "--host", "0.0.0.0", "--data-dir", str(tmp_path))  # noqa: S104 - the point
    assert not get_user_model().objects.filter(username="admin").exists()  # refused before any setup


@pytest.mark.parametrize(("asked", "debug"), [((), "DEBUG= "), (("DEBUG=1",), "DEBUG=1 ")])
def test_make_demo_runs_without_debug_unless_the_developer_asks(asked, debug):
    import subprocess

    from django.conf import settings

    plan = subprocess.run(
        ["make", "-n", "demo", *asked], cwd=settings.BASE_DIR, capture_output=True, text=True, check=True
    ).stdout
    (line,) = [line for line in plan.splitlines() if "manage.py demo" in line]
    assert line.startswith(debug) and "SECRET_KEY_FILE=var/secret-key" in line


@pytest.mark.timeout(600)
@pytest.mark.skipif(
    not POSTGRES, reason="the serving connections' lock/statement timeouts are Postgres's: runs with DATABASE_URL"
)
def test_the_demo_serves_on_postgres_with_the_web_process_database_timeouts(tmp_path):
    """`manage.py demo` serves the way `make run` does: its server's Postgres connections give up on a lock
    after SCOUT_DB_LOCK_TIMEOUT, so a call meeting locked grant tables is answered "busy" instead of hanging.
    Its database starts as a copy of the session's migrated one: the demo's own migrate finds nothing to do."""
    import subprocess
    import sys
    import time
    import uuid
    from concurrent.futures import ThreadPoolExecutor

    import httpx
    from django.conf import settings

    name = f"scout_demo_{uuid.uuid4().hex[:12]}"
    migrated_postgres(name)
    url, port = postgres_url(name), free_port()
    base = f"http://127.0.0.1:{port}"
    env = {key: value for key, value in os.environ.items() if key not in ("REDIS_URL", "TESTING", "DEBUG")}
    env.update(DATABASE_URL=url, SECRET_KEY="demo-test-only-not-a-secret", SCOUT_PUBLIC_URL=base, CI="1")
    out = tmp_path / "demo.out"
    with out.open("wb") as log:
        demo = subprocess.Popen(
            [sys.executable, "manage.py", "demo", "--port", str(port), "--data-dir", str(tmp_path / "var")],
            cwd=settings.BASE_DIR,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        token, deadline = None, time.monotonic() + 400
        while token is None:
            assert demo.poll() is None, out.read_text()[-3000:]
            assert time.monotonic() < deadline, out.read_text()[-3000:]
            time.sleep(0.5)
            token = next((word for word in out.read_text().split() if word.startswith("scout_")), None)
            if token is not None:
                try:
                    httpx.get(f"{base}/healthz", timeout=1)
                except httpx.HTTPError:
                    token = None

        def execute() -> dict:
            body = modern_request(
                "tools/call",
                {
                    "name": "execute_tool",
                    "arguments": {"tool_id": "time::get_current_time", "arguments": {"timezone": "UTC"}},
                },
            )
            headers = {
                "Content-Type": "application/json",
                "Accept": "application/json, text/event-stream",
                "MCP-Protocol-Version": MODERN,
                "Mcp-Method": "tools/call",
                "Mcp-Name": "execute_tool",
                "Authorization": f"Bearer {token}",
            }
            # A deadline on the whole answer (an SSE stream may keep a read alive): the lock timeout is 2 s.
            call = ThreadPoolExecutor(max_workers=1)
            answer = call.submit(httpx.post, f"{base}/mcp", json=body, headers=headers, timeout=60)
            try:
                response = answer.result(timeout=30)
            except TimeoutError:
                pytest.fail("the demo's server waited on the lock: its connections have no lock timeout")
            finally:
                call.shutdown(wait=False)
            return rpc_result(response)["result"]

        assert not execute()["isError"]
        with TableLock(url, *GRANT_TABLES):
            locked = execute()
        assert locked["isError"] and locked["structuredContent"]["service_busy"] is True, locked
        assert not execute()["isError"]  # the lock is gone: the same call works
    finally:
        demo.terminate()
        demo.wait(30)
        drop_postgres_database(name)


def test_make_run_links_name_the_port_it_serves_on_unless_the_public_url_is_set(monkeypatch):
    import subprocess

    from django.conf import settings

    def run_line(*args: str) -> str:
        plan = subprocess.run(
            ["make", "-n", "run", *args], cwd=settings.BASE_DIR, capture_output=True, text=True, check=True
        ).stdout
        (line,) = [line for line in plan.splitlines() if "uvicorn" in line]
        return line

    monkeypatch.delenv("SCOUT_PUBLIC_URL", raising=False)
    assert "SCOUT_PUBLIC_URL=http://127.0.0.1:8799 " in run_line("PORT=8799")
    monkeypatch.setenv("SCOUT_PUBLIC_URL", "https://scout.example.com")
    assert "SCOUT_PUBLIC_URL=https://scout.example.com " in run_line("PORT=8799")


def test_a_newcomers_demo_migrates_its_empty_database_itself(tmp_path):
    """`make demo` on a fresh clone: the demo's own migrate makes the tables (the other demo tests start on a
    migrated database). Interrupted once its logins exist, before it syncs anything."""
    import signal
    import sqlite3
    import subprocess
    import sys
    import time

    from django.conf import settings

    database = tmp_path / "scout.sqlite3"
    env = {key: value for key, value in os.environ.items() if key not in ("DATABASE_URL", "REDIS_URL", "TESTING")}
    env.update(SQLITE_PATH=str(database), SECRET_KEY="demo-test-only-not-a-secret", DEBUG="")
    demo = subprocess.Popen(
        [sys.executable, "manage.py", "demo", "--no-serve", "--data-dir", str(tmp_path / "var")],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )

    def admin_exists() -> bool:
        try:
            with sqlite3.connect(f"file:{database}?mode=ro", uri=True) as reader:
                return reader.execute("SELECT 1 FROM auth_user WHERE username = 'admin'").fetchone() is not None
        except sqlite3.OperationalError:  # no file or no table yet
            return False

    try:
        deadline = time.monotonic() + 300
        while not admin_exists():
            assert demo.poll() is None and time.monotonic() < deadline, demo.communicate()[0][-3000:]
            time.sleep(0.05)
        demo.send_signal(signal.SIGINT)
        printed = demo.communicate(timeout=120)[0].decode()
    finally:
        demo.kill()
        demo.wait(30)
    # Interrupted (130) as a rule; a demo that got through its syncs before the signal came (a fast machine, a slow
    # poll) exits 0: either way its own migrate made the tables its logins are in.
    assert demo.returncode in (0, 130), printed[-3000:]
    if demo.returncode == 130:
        assert "interrupted before the demo was ready; nothing is served" in printed
