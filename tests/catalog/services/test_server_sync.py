"""server_sync against real MCP servers: PyPI servers over stdio, an SDK server over Streamable HTTP,
and scripted servers that misbehave on purpose."""

import contextlib
import json
import os
import signal
import threading
import time

import pytest
from django.db import connection
from django.utils import timezone
from mcp.server.mcpserver import MCPServer

from catalog.choices import ServerStatus, SyncStatus, Transport
from catalog.locks import named_lock
from catalog.models import SyncRun, Tool, ToolRevision
from catalog.services.sync import server_sync, server_sync_lock_name
from tests.catalog.servers.fixtures import BIN_DIR, good_tool, shared_reference_bomb
from tests.catalog.servers.http_mcp import add as add_fn
from tests.catalog.servers.http_mcp import greet_v2, refused_url, serve_http, silent_listener

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60), pytest.mark.usefixtures("loopback_upstreams")]

TIME_TOOLS = {"get_current_time", "convert_time"}
GIT_TOOLS = {
    "git_add",
    "git_branch",
    "git_checkout",
    "git_commit",
    "git_create_branch",
    "git_diff",
    "git_diff_staged",
    "git_diff_unstaged",
    "git_log",
    "git_reset",
    "git_show",
    "git_status",
}


def live_names(server) -> set[str]:
    return set(Tool.objects.live().filter(server=server).values_list("name", flat=True))


def counts(run: SyncRun) -> tuple[int, int, int, int]:
    return run.added, run.changed, run.unchanged, run.removed


# --- real servers over stdio -----------------------------------------------------------------------


def test_syncs_mcp_server_time_over_stdio(make_server):
    server = make_server("time", command=str(BIN_DIR / "mcp-server-time"))

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.SUCCESS, run.error
    assert counts(run) == (2, 0, 0, 0)
    assert live_names(server) == TIME_TOOLS
    tool = Tool.objects.get(tool_id="time::get_current_time")
    assert tool.input_schema["required"] == ["timezone"]
    assert tool.annotations["readOnlyHint"] is True
    assert len(tool.definition_hash) == 64
    assert ToolRevision.objects.filter(tool=tool).count() == 1
    server.refresh_from_db()
    assert server.status == ServerStatus.ACTIVE
    assert server.last_synced_at is not None and server.last_error == ""
    assert run.finished_at >= run.started_at and run.source == "test"


def test_bare_command_name_is_found_in_scouts_virtualenv(make_server):
    server = make_server("time", command="mcp-server-time")

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.SUCCESS, run.error
    assert live_names(server) == TIME_TOOLS


def test_syncs_mcp_server_git_against_a_real_repository_and_second_run_changes_nothing(make_server, git_repo):
    server = make_server("git", command=str(BIN_DIR / "mcp-server-git"), args=["--repository", str(git_repo)])

    first = server_sync(server_pk=server.pk, trigger="test")
    hashes = dict(Tool.objects.filter(server=server).values_list("name", "definition_hash"))
    second = server_sync(server_pk=server.pk, trigger="test")

    assert first.status == SyncStatus.SUCCESS, first.error
    assert live_names(server) == GIT_TOOLS
    assert counts(first) == (len(GIT_TOOLS), 0, 0, 0)
    assert second.status == SyncStatus.SUCCESS
    assert counts(second) == (0, 0, len(GIT_TOOLS), 0)
    assert dict(Tool.objects.filter(server=server).values_list("name", "definition_hash")) == hashes
    assert ToolRevision.objects.filter(tool__server=server).count() == len(GIT_TOOLS)


def test_passes_only_the_named_environment_variables(scripted, monkeypatch):
    """A stdio server sees the variables it names and the basics, never the rest of Scout's environment."""
    monkeypatch.setenv("SCOUT_TEST_PASSED", "yes")
    monkeypatch.setenv("SCOUT_TEST_SECRET", "must-not-leak")
    server, _ = scripted({"pages": [[]], "env_tool": True})
    server.env_vars = ["SCOUT_TEST_PASSED"]
    server.save()

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.SUCCESS, run.error
    seen = set(Tool.objects.get(server=server, name="env").description.split())
    assert {"SCOUT_TEST_PASSED", "PATH", "HOME"} <= seen
    assert "SCOUT_TEST_SECRET" not in seen
    assert "DATABASE_URL" not in seen and "REDIS_URL" not in seen


@pytest.mark.parametrize("action", ["exit", "error"])
def test_a_servers_own_secret_in_its_failure_is_never_kept_shown_or_logged(scripted, monkeypatch, caplog, action):
    """A stdio server that quotes the token Scout gave it (on its stderr as it dies, or in an error's message) has
    it replaced in the sync run's error and the server's last error (both shown in the admin, to a tenant's operator
    too for a shared server) and in the log (T14)."""
    secret = "ghp_5ecretT0kenOfTheServer"
    monkeypatch.setenv("SCOUT_TEST_SERVER_TOKEN", secret)
    server, _ = scripted({"pages": [[]], "fail_on_page": {"1": action}, "quote_env": ["SCOUT_TEST_SERVER_TOKEN"]})
    server.env_vars = ["SCOUT_TEST_SERVER_TOKEN"]
    server.save()

    run = server_sync(server_pk=server.pk, trigger="test")

    server.refresh_from_db()
    assert run.status == SyncStatus.FAILED
    assert "SCOUT_TEST_SERVER_TOKEN=[redacted]" in run.error  # the server's words are kept, its token is not
    for text in (run.error, server.last_error, caplog.text):
        assert secret not in text


def test_a_servers_own_secret_in_its_listing_is_never_stored_or_served(scripted, monkeypatch):
    """A tool whose description or schema quotes the token Scout gave its server is kept with the token replaced:
    its text is stored, indexed and shown to everyone who may discover the tool (T14)."""
    secret = "ghp_5ecretT0kenOfTheServer"
    monkeypatch.setenv("SCOUT_TEST_SERVER_TOKEN", secret)
    server, _ = scripted({"pages": [[]], "quote_env": ["SCOUT_TEST_SERVER_TOKEN"]})
    server.env_vars = ["SCOUT_TEST_SERVER_TOKEN"]
    server.save()

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.SUCCESS, run.error
    tool = Tool.objects.get(server=server, name="quoting")
    assert tool.description == "Calls the API as SCOUT_TEST_SERVER_TOKEN=[redacted]"
    assert tool.input_schema["properties"]["token"]["default"] == "SCOUT_TEST_SERVER_TOKEN=[redacted]"
    stored = json.dumps([list(Tool.objects.values()), list(ToolRevision.objects.values())], default=str)
    assert secret not in stored


# --- Streamable HTTP ---------------------------------------------------------------------------------


def test_http_changes_give_revisions_tombstones_and_a_quiet_second_run(make_server, http_upstream):
    server = make_server("web", transport=Transport.HTTP, url=http_upstream.url)

    first = server_sync(server_pk=server.pk, trigger="test")
    assert first.status == SyncStatus.SUCCESS, first.error
    assert counts(first) == (3, 0, 0, 0)
    assert live_names(server) == {"greet", "add", "bump"}
    greet = Tool.objects.get(tool_id="web::greet")
    old_hash = greet.definition_hash

    # The server changes greet's schema and drops add.
    http_upstream.mcp.remove_tool("greet")
    http_upstream.mcp.add_tool(greet_v2, name="greet")
    http_upstream.mcp.remove_tool("add")
    second = server_sync(server_pk=server.pk, trigger="test")

    assert second.status == SyncStatus.SUCCESS, second.error
    assert counts(second) == (0, 1, 1, 1)
    greet.refresh_from_db()
    assert greet.definition_hash != old_hash
    assert "loud" in greet.input_schema["properties"]
    assert set(greet.revisions.values_list("definition_hash", flat=True)) == {old_hash, greet.definition_hash}
    assert greet.revisions.latest().definition["inputSchema"]["properties"]["loud"]["type"] == "boolean"
    add = Tool.objects.get(tool_id="web::add")
    assert add.removed_at is not None  # tombstoned, not deleted
    assert live_names(server) == {"greet", "bump"}

    third = server_sync(server_pk=server.pk, trigger="test")
    assert counts(third) == (0, 0, 2, 0)
    assert ToolRevision.objects.filter(tool__server=server).count() == 4

    # The tool comes back: the tombstone lifts and the known revision is reused.
    http_upstream.mcp.add_tool(add_fn, name="add")
    fourth = server_sync(server_pk=server.pk, trigger="test")
    assert counts(fourth) == (1, 0, 2, 0)
    add.refresh_from_db()
    assert add.removed_at is None
    assert ToolRevision.objects.filter(tool=add).count() == 1


def test_sync_never_touches_curation(make_server, http_upstream):
    server = make_server("web", transport=Transport.HTTP, url=http_upstream.url)
    server_sync(server_pk=server.pk, trigger="test")
    Tool.objects.filter(tool_id="web::greet").update(title="Say hello", purpose="Greets", curated_at=timezone.now())
    http_upstream.mcp.remove_tool("greet")
    http_upstream.mcp.add_tool(greet_v2, name="greet")

    run = server_sync(server_pk=server.pk, trigger="test")

    greet = Tool.objects.get(tool_id="web::greet")
    assert run.changed == 1
    assert (greet.title, greet.purpose) == ("Say hello", "Greets")


def test_http_headers_come_from_named_variables_and_a_missing_one_is_a_clear_error(make_server, http_upstream):
    server = make_server(
        "web", transport=Transport.HTTP, url=http_upstream.url, header_env={"Authorization": "SCOUT_TEST_UNSET_TOKEN"}
    )

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.FAILED
    assert "SCOUT_TEST_UNSET_TOKEN" in run.error and "not set" in run.error
    assert not Tool.objects.filter(server=server).exists()


# --- failures change nothing -------------------------------------------------------------------------


@pytest.mark.parametrize("action", ["exit", "error", "hang"])
def test_server_failing_on_page_two_changes_nothing(scripted, settings, action):
    settings.SCOUT_UPSTREAM_LIST_TIMEOUT = 1.5
    one, two = [good_tool("alpha"), good_tool("beta")], [good_tool("gamma")]
    server, write = scripted({"pages": [one, two]})
    first = server_sync(server_pk=server.pk, trigger="test")
    assert first.status == SyncStatus.SUCCESS, first.error
    before = {t.name: (t.definition_hash, t.removed_at, t.last_seen_at) for t in Tool.objects.filter(server=server)}

    # Page 1 now differs (a change and a removal), then page 2 fails.
    write({"pages": [[good_tool("alpha", description="changed")], two], "fail_on_page": {"2": action}})
    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.FAILED
    expected = {"exit": "closed the connection", "error": "page 2 exploded", "hang": "timed out after 1.5s"}[action]
    assert expected in run.error
    if action == "exit":
        assert "exiting on page 2" in run.error  # the server's own stderr explains it
    after = {t.name: (t.definition_hash, t.removed_at, t.last_seen_at) for t in Tool.objects.filter(server=server)}
    assert after == before
    assert counts(run) == (0, 0, 0, 0)
    server.refresh_from_db()
    assert server.status == ServerStatus.DEGRADED
    assert server.last_error == run.error


def test_paged_listing_is_read_in_full(scripted):
    pages = [[good_tool(f"tool_{page}_{i}") for i in range(3)] for page in range(4)]
    server, _ = scripted({"pages": pages})

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.SUCCESS, run.error
    assert run.added == 12 and len(live_names(server)) == 12


def test_cursor_loop_and_page_cap_fail_without_changes(scripted, settings):
    server, write = scripted({"pages": [[good_tool("alpha")]], "loop_cursor": True})
    run = server_sync(server_pk=server.pk, trigger="test")
    assert run.status == SyncStatus.FAILED and "cursor loop" in run.error

    settings.SCOUT_UPSTREAM_MAX_PAGES = 2
    write({"pages": [[good_tool("a")], [good_tool("b")], [good_tool("c")]]})
    run = server_sync(server_pk=server.pk, trigger="test")
    assert run.status == SyncStatus.FAILED and "after 2 pages" in run.error
    assert not Tool.objects.filter(server=server).exists()


def test_a_listing_of_more_tools_than_the_cap_fails_without_changes(scripted, settings):
    """T13: nothing bounded how many tools a server listed (8,000 took 11.5 s to save, before review and indexing,
    at every sync; 500 pages of some 4 MB each could list millions). Past SCOUT_UPSTREAM_MAX_TOOLS the sync fails
    and keeps what the server had."""
    settings.SCOUT_UPSTREAM_MAX_TOOLS = 3
    server, write = scripted({"pages": [[good_tool("a"), good_tool("b")], [good_tool("c")]]})
    assert server_sync(server_pk=server.pk, trigger="test").status == SyncStatus.SUCCESS
    write({"pages": [[good_tool("a"), good_tool("b")], [good_tool("c"), good_tool("d")]]})
    run = server_sync(server_pk=server.pk, trigger="test")
    assert run.status == SyncStatus.FAILED and "listed more than 3 tools" in run.error, run.error
    assert live_names(server) == {"a", "b", "c"}


def test_status_goes_degraded_then_unavailable_then_active_again(scripted):
    server, write = scripted({"pages": [[good_tool("alpha")]]})
    assert server_sync(server_pk=server.pk, trigger="test").status == SyncStatus.SUCCESS
    write({"pages": [[good_tool("alpha")]], "fail_on_page": {"1": "error"}})

    statuses = []
    for _ in range(2):
        server_sync(server_pk=server.pk, trigger="test")
        server.refresh_from_db()
        statuses.append(server.status)
    write({"pages": [[good_tool("alpha")]]})
    server_sync(server_pk=server.pk, trigger="test")
    server.refresh_from_db()

    assert statuses == [ServerStatus.DEGRADED, ServerStatus.UNAVAILABLE]
    assert server.status == ServerStatus.ACTIVE and server.last_error == ""
    assert live_names(server) == {"alpha"}  # the failures lost nothing


@pytest.fixture
def python_sigint():
    """Python's own SIGINT handler (KeyboardInterrupt) for the test, as in a terminal: a suite started as a background
    job of a non-interactive shell (`cmd &`) inherits SIGINT ignored, and Python then keeps it ignored."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def test_a_sync_interrupted_by_ctrl_c_is_recorded_failed_not_left_running(scripted, python_sigint):
    """Ctrl-C during `make demo` or `catalog_sync` left the run "running" for ever in the admin. The scripted
    server sends this process a real SIGINT when asked for its tools, as a terminal's Ctrl-C would."""
    server, write = scripted({"pages": [[good_tool("alpha")]]})
    assert server_sync(server_pk=server.pk, trigger="test").status == SyncStatus.SUCCESS
    write({"pages": [[good_tool("beta")]], "interrupt_on_list": os.getpid()})

    with pytest.raises(KeyboardInterrupt):
        server_sync(server_pk=server.pk, trigger="test")

    run = SyncRun.objects.latest("pk")
    assert run.status == SyncStatus.FAILED and run.finished_at is not None
    assert run.error == "interrupted while listing tools (KeyboardInterrupt)"
    server.refresh_from_db()
    assert server.status == ServerStatus.ACTIVE  # an interrupt is not the server's failure
    assert live_names(server) == {"alpha"}
    write({"pages": [[good_tool("beta")]]})
    assert server_sync(server_pk=server.pk, trigger="test").status == SyncStatus.SUCCESS  # the lock was released


# --- bad input ---------------------------------------------------------------------------------------


def test_command_that_does_not_exist(make_server):
    server = make_server("ghost", command="scout-no-such-command-xyz")

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.FAILED
    assert "command not found" in run.error and "scout-no-such-command-xyz" in run.error
    server.refresh_from_db()
    assert server.status == ServerStatus.UNAVAILABLE  # it never worked
    assert server.last_error == run.error


def test_url_that_refuses_connections(make_server):
    server = make_server("refused", transport=Transport.HTTP, url=refused_url())

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.FAILED
    assert "connection refused" in run.error and server.url in run.error
    server.refresh_from_db()
    assert server.status == ServerStatus.UNAVAILABLE


def test_stdio_server_that_hangs_on_connect_times_out(scripted, settings):
    settings.SCOUT_UPSTREAM_CONNECT_TIMEOUT = 1.0
    server, _ = scripted({"pages": [[good_tool("alpha")]], "hang_on_connect": True})

    run = server_sync(server_pk=server.pk, trigger="test")

    # The server never answers: returning at all, with the timeout's message, proves the timeout fired.
    assert run.status == SyncStatus.FAILED
    assert "timed out after 1s while connecting" in run.error


def test_http_server_that_never_answers_times_out(make_server, settings):
    settings.SCOUT_UPSTREAM_CONNECT_TIMEOUT = 1.0
    with silent_listener() as url:
        server = make_server("silent", transport=Transport.HTTP, url=url)
        run = server_sync(server_pk=server.pk, trigger="test")

    # The listener accepts and never answers: the timeout's message proves the timeout ended the wait.
    assert run.status == SyncStatus.FAILED and "timed out after 1s while connecting" in run.error


def test_bad_tools_are_rejected_one_by_one_and_good_tools_kept(scripted):
    bad = [
        {"description": "I have no name", "inputSchema": {"type": "object"}},
        {"name": "stringly", "inputSchema": {"type": "string"}},
        {"name": "huge", "description": "x" * 1_000_000, "inputSchema": {"type": "object"}},
        good_tool("twice"),
        good_tool("twice", description="the second twice"),
        {
            "name": "remote_ref",
            "inputSchema": {"type": "object", "properties": {"a": {"$ref": "https://example.com/s.json"}}},
        },
    ]
    server, _ = scripted({"pages": [[good_tool("alpha"), *bad[:3]], [*bad[3:], good_tool("omega")]]})

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.PARTIAL
    assert live_names(server) == {"alpha", "twice", "omega"}
    assert Tool.objects.get(server=server, name="twice").description == "The twice tool."  # the first kept
    reasons = {item["name"]: item["reason"] for item in run.rejections}
    assert run.rejected == 5 and len(reasons) == 5
    assert reasons["#1"] == "tool has no name"
    assert "must describe an object" in reasons["stringly"]
    assert "over the" in reasons["huge"] and "byte limit" in reasons["huge"]
    assert "duplicate tool name" in reasons["twice"]
    assert "remote $ref" in reasons["remote_ref"]
    assert "5 tool(s) rejected" in run.error
    server.refresh_from_db()
    assert server.status == ServerStatus.ACTIVE
    assert "5 tool(s) rejected" in server.last_error


def test_a_listed_tool_turned_bad_is_kept_with_its_last_good_definition(scripted):
    server, write = scripted({"pages": [[good_tool("alpha"), good_tool("beta")]]})
    server_sync(server_pk=server.pk, trigger="test")
    beta = Tool.objects.get(server=server, name="beta")

    write({"pages": [[good_tool("alpha"), {"name": "beta", "inputSchema": {"type": "array"}}]]})
    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.PARTIAL and run.removed == 0
    refreshed = Tool.objects.get(pk=beta.pk)
    assert refreshed.removed_at is None and refreshed.definition_hash == beta.definition_hash


def test_schemas_with_patterns_re2_cannot_run_are_refused_with_the_reason(scripted):
    """Arguments are checked with RE2 (no backtracking, hence no ReDoS): a backreference or a lookahead
    cannot be checked, so the tool is refused at sync, clearly, and the other tools are kept."""

    BACKREFERENCE = r"^(a)\1$"

    def with_pattern(name: str, pattern: str) -> dict:
        return good_tool(
            name, inputSchema={"type": "object", "properties": {"a": {"type": "string", "pattern": pattern}}}
        )

    listing = [
        with_pattern("backreference", BACKREFERENCE),
        with_pattern("lookahead", r"^(?=x)x$"),
        good_tool("keyed", inputSchema={"type": "object", "patternProperties": {r"(?<!a)b": {"type": "string"}}}),
        with_pattern("linear", r"^[a-z]+(-[a-z]+)*$"),
    ]
    server, _ = scripted({"pages": [listing]})

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.PARTIAL and live_names(server) == {"linear"}
    reasons = {item["name"]: item["reason"] for item in run.rejections}
    assert reasons.keys() == {"backreference", "lookahead", "keyed"}
    assert reasons["backreference"].startswith(f"inputSchema: regular expression {BACKREFERENCE!r} is not supported")
    assert reasons["backreference"].endswith("at $.properties.a.pattern")
    assert "at $.properties.a.pattern" in reasons["lookahead"]
    assert "at $.patternProperties" in reasons["keyed"]


def test_schemas_whose_check_takes_exponential_time_are_refused_with_the_reason(scripted):
    """C1-19: a 2 kB inputSchema of 40 definitions, each an anyOf of two references to the one before, was accepted
    and made each call's argument check take 2**40 steps (cut only by the 3 s deadline, per call). Sync now counts
    the evaluations a schema can cause and refuses it, as it does an unsafe regex; so is a recursion that doubles
    per level of the caller's data. Recursive schemas that only follow the data (a tree, any JSON value) are kept."""
    node = {
        "type": "object",
        "properties": {
            "label": {"type": "string"},
            "left": {"$ref": "#/$defs/node"},
            "right": {"$ref": "#/$defs/node"},
            "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
        },
    }
    json_value = {
        "anyOf": [
            {"type": ["string", "number", "boolean", "null"]},
            {"type": "array", "items": {"$ref": "#/$defs/value"}},
            {"type": "object", "additionalProperties": {"$ref": "#/$defs/value"}},
        ]
    }
    doubling = {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/nest"}}] * 2}

    def with_root(name: str, definitions: dict) -> dict:
        first = next(iter(definitions))
        schema = {"type": "object", "properties": {"root": {"$ref": f"#/$defs/{first}"}}, "$defs": definitions}
        return good_tool(name, inputSchema=schema)

    # Large without sharing (an inlined OpenAPI body): one evaluation per subschema, bounded by the size limit.
    wide = {"type": "object", "properties": {f"p{index}": {} for index in range(12_000)}}
    bomb = shared_reference_bomb(40)
    # The same by anchors, and inside a nested resource (its "#/..." references resolve against its $id).
    by_anchor = json.loads(json.dumps(bomb).replace('"#/$defs/', '"#'))
    for name, definition in by_anchor["$defs"].items():
        definition["$anchor"] = name
    nested = {"$id": "urn:scout:inner", "$ref": "#/$defs/level40", "$defs": bomb["$defs"]}
    listing = [
        good_tool("bomb", inputSchema=bomb),
        good_tool("by_anchor", inputSchema=by_anchor),
        good_tool("nested", inputSchema={"type": "object", "properties": {"code": nested}}),
        with_root("doubling", {"nest": doubling}),
        with_root("tree", {"node": node}),
        with_root("value", {"value": json_value}),
        good_tool("wide", inputSchema=wide),
    ]
    server, _ = scripted({"pages": [listing]})

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.PARTIAL and live_names(server) == {"tree", "value", "wide"}
    reasons = {item["name"]: item["reason"] for item in run.rejections}
    assert reasons.keys() == {"bomb", "by_anchor", "nested", "doubling"}
    assert reasons["bomb"].startswith("inputSchema: checking arguments can take over 10123 subschema evaluations")
    assert reasons["by_anchor"].endswith("from #level12") and reasons["nested"].endswith("from #/$defs/level12")
    assert reasons["doubling"].endswith("from #/$defs/nest")
    assert Tool.objects.get(server=server, name="tree").input_schema["$defs"]["node"] == node


def test_a_schema_nested_too_deep_is_refused_with_the_reason_and_the_others_kept(scripted):
    """A chain of 1,000 references (a few kB, shallow as JSON, so the MCP SDK reads it) made the schema checks raise
    RecursionError: the sync failed whole ("internal error while saving the listing"), a traceback in the worker."""
    from tests.catalog.test_definitions import nested_any_of, reference_chain

    listing = [
        good_tool("chain", inputSchema=reference_chain(1000)),
        good_tool("nested", inputSchema=nested_any_of(30)),
    ]
    server, _ = scripted({"pages": [listing]})

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.PARTIAL and live_names(server) == {"nested"}
    assert run.rejections == [
        {
            "name": "chain",
            "reason": "inputSchema: subschemas nest more than 100 levels deep (references followed), at #/$defs/d99",
        }
    ]


def test_a_tool_whose_x_mcp_header_annotation_is_invalid_is_refused_with_the_reason_and_the_others_kept(scripted):
    """MCP 2026-07-28 clients must drop a listed tool whose x-mcp-header annotation is invalid (the SDK's client
    does): Scout kept such tools, so it served a tool that 2026 callers never see and 2025 callers do."""

    def annotated(name: str, properties: dict, **schema: object) -> dict:
        return good_tool(name, inputSchema={"type": "object", "properties": properties, **schema})

    text = {"type": "string", "x-mcp-header": "Region"}
    listing = [
        annotated("on_a_number", {"n": {"type": "number", "x-mcp-header": "N"}}),
        annotated("not_a_token", {"a": {"type": "string", "x-mcp-header": "Bad Name"}}),
        annotated("twice", {"a": text, "b": {**text, "x-mcp-header": "region"}}),
        annotated("inside_any_of", {}, anyOf=[{"properties": {"a": text}}]),
        annotated(
            "valid",
            {"region": text, "nested": {"type": "object", "properties": {"id": {**text, "x-mcp-header": "Id"}}}},
        ),
        good_tool("plain"),
    ]
    server, _ = scripted({"pages": [listing]})

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.PARTIAL and live_names(server) == {"valid", "plain"}
    reasons = {item["name"]: item["reason"] for item in run.rejections}
    assert reasons.keys() == {"on_a_number", "not_a_token", "twice", "inside_any_of"}
    assert all(reason.endswith("(MCP 2026-07-28 clients drop such a tool)") for reason in reasons.values())
    assert "only permitted on integer/string/boolean properties (got 'number')" in reasons["on_a_number"]
    assert "'Bad Name' is not an RFC 9110 token" in reasons["not_a_token"]
    assert "duplicates property" in reasons["twice"]
    assert "not reachable via a pure `properties` chain" in reasons["inside_any_of"]


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_listing_nested_too_deep_for_the_sdk_to_read_fails_at_once_saying_so(scripted, make_server, transport):
    """The SDK reads messages with pydantic, which stops at about 200 levels of JSON: over stdio it logged and dropped
    such a tools/list answer, and the sync waited out its whole timeout to fail as "timed out while listing tools"
    (the operator was sent to look at a slow server). It now fails as soon as the answer arrives, saying why; over
    HTTP the SDK's parse error (which quoted the start of the server's answer) is reworded the same way."""
    from tests.catalog.test_definitions import nested_properties

    deep = nested_properties(120)  # 240 levels of JSON; sync refuses a definition one by one only past 100
    if transport == "stdio":
        server, _ = scripted({"pages": [[good_tool("deep", inputSchema=deep), good_tool("flat")]]})
        context = contextlib.nullcontext()
    else:
        upstream = MCPServer("deep")
        upstream.add_tool(add_fn, name="deep")
        upstream._tool_manager.get_tool("deep").parameters = deep  # noqa: SLF001 - a schema no signature gives
        context = serve_http(upstream)
    with context as running:
        if running is not None:
            server = make_server("deep", transport=Transport.HTTP, url=running.url)
        run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.FAILED, run.error
    assert "protocol error while listing tools: the server's answer nests more than about 200 levels" in run.error
    assert "MCP SDK cannot read (recursion limit exceeded at line 1 column" in run.error
    assert "timed out" not in run.error and "input_value" not in run.error


def test_a_tool_holding_a_nul_character_is_refused_with_the_reason_and_the_others_kept(scripted):
    """Postgres refuses a NUL in text and JSON: one upstream tool holding one (in its description, title or schema)
    failed the saving of the server's whole listing ("internal error while saving the listing"), every sync after."""
    listing = [
        good_tool("described", description="Pings\x00 the host."),
        good_tool("schema", inputSchema={"type": "object", "properties": {"a": {"type": "string", "enum": ["x\x00"]}}}),
        good_tool("clean"),
    ]
    server, _ = scripted({"pages": [listing]})

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.PARTIAL and live_names(server) == {"clean"}
    reasons = {item["name"]: item["reason"] for item in run.rejections}
    assert reasons == {
        "described": "a text holds a NUL character at $.description, which the catalog cannot store",
        "schema": "a text holds a NUL character at $.inputSchema.properties.a.enum[0], which the catalog cannot store",
    }


def test_an_upstream_text_holding_a_nul_character_is_recorded_replaced(scripted):
    """An upstream's error message (or a tool name) holding a NUL failed the writing of the run's own record on
    Postgres: the run stayed "running" for ever and the server's failure was never recorded (it read active)."""
    server, write = scripted({"pages": [[good_tool("a\x00b"), good_tool("clean")]]})
    run = server_sync(server_pk=server.pk, trigger="test")
    assert run.status == SyncStatus.PARTIAL and live_names(server) == {"clean"}
    assert [item["name"] for item in SyncRun.objects.get(pk=run.pk).rejections] == ["a\ufffdb"]

    write({"pages": [[good_tool("clean")]], "fail_on_page": {"1": "error"}, "error_message": "broken\x00 upstream"})
    run = server_sync(server_pk=server.pk, trigger="test")
    stored = SyncRun.objects.get(pk=run.pk)
    assert stored.status == SyncStatus.FAILED and "broken\ufffd upstream" in stored.error
    server.refresh_from_db()
    assert server.status == ServerStatus.DEGRADED and server.last_error == stored.error


def test_a_tool_with_an_over_long_title_is_kept_with_the_title_cut(scripted):
    """A title longer than the 500-character column failed the saving of the server's whole listing on Postgres
    ("value too long", every sync after) while SQLite stored it: the title is cut with a marker, the tool kept."""
    server, _ = scripted({"pages": [[good_tool("titled", title="T" * 600), good_tool("clean")]]})

    run = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.SUCCESS and live_names(server) == {"titled", "clean"}
    assert Tool.objects.get(server=server, name="titled").upstream_title == "T" * 499 + "…"


# --- what is not synced, and the lock ---------------------------------------------------------------


def test_disabled_and_imported_servers_are_skipped(make_server):
    disabled = make_server("off", command=str(BIN_DIR / "mcp-server-time"), status=ServerStatus.DISABLED)
    imported = make_server("dump", transport=Transport.IMPORTED)

    runs = [server_sync(server_pk=s.pk, trigger="test") for s in (disabled, imported)]

    assert [r.status for r in runs] == [SyncStatus.SKIPPED, SyncStatus.SKIPPED]
    assert "disabled" in runs[0].error and "no live connection" in runs[1].error
    assert not Tool.objects.exists()
    disabled.refresh_from_db()
    assert disabled.status == ServerStatus.DISABLED


def test_a_run_that_cannot_take_the_lock_is_skipped(make_server):
    server = make_server("time", command=str(BIN_DIR / "mcp-server-time"))

    with named_lock(server_sync_lock_name(server.pk), ttl=60) as held:
        assert held
        run = server_sync(server_pk=server.pk, trigger="test")
    after = server_sync(server_pk=server.pk, trigger="test")

    assert run.status == SyncStatus.SKIPPED and "another sync" in run.error
    assert after.status == SyncStatus.SUCCESS  # the lock was released


@pytest.mark.django_db(transaction=True)
def test_second_concurrent_run_for_the_same_server_is_skipped(scripted):
    server, write = scripted({"pages": [[good_tool("alpha")]]})
    write({"pages": [[good_tool("alpha")]], "delay": 2.0})
    results: list[SyncRun] = []

    def run_first() -> None:
        try:
            results.append(server_sync(server_pk=server.pk, trigger="first"))
        finally:
            connection.close()  # this thread's own connection, or the test database cannot be dropped

    first = threading.Thread(target=run_first)
    first.start()
    deadline = time.monotonic() + 60
    while not SyncRun.objects.filter(server=server, status=SyncStatus.RUNNING).exists():
        assert time.monotonic() < deadline, "the first run never started"
        time.sleep(0.05)

    second = server_sync(server_pk=server.pk, trigger="second")
    first.join(timeout=60)

    assert second.status == SyncStatus.SKIPPED
    assert results and results[0].status == SyncStatus.SUCCESS, results and results[0].error
    assert live_names(server) == {"alpha"}
