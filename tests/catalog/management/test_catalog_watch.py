"""manage.py catalog_watch: a server announcing tools/list_changed gets re-synced."""

import threading
import time
from collections.abc import Callable, Iterator
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from catalog import upstream
from catalog.choices import SyncStatus, Transport
from catalog.models import SyncRun, Tool

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]
# The most each test's watcher runs: the tests stop it (``stop``) once what they wait for happened, never after a
# fixed pause; this only ends a watcher whose test failed before it could.
WATCH_SECONDS = "120"


def _messages(caplog, part: str) -> list[str]:
    return [record.getMessage() for record in caplog.records if part in record.getMessage()]


def _until(watcher: threading.Thread, condition: Callable[[], bool], what: str) -> None:
    """Wait until ``condition()`` holds, while the watcher runs."""
    while not condition():
        assert watcher.is_alive(), f"the watcher stopped before {what}"
        time.sleep(0.1)


def _until_watching(watcher: threading.Thread, caplog, servers: int) -> None:
    """Wait until ``servers`` sessions are subscribed (the watcher logs "<slug>: watching" once acknowledged)."""
    _until(watcher, lambda: len(_messages(caplog, ": watching (protocol")) >= servers, "it subscribed")


def _watching(stop: threading.Event, *options: str) -> threading.Thread:
    """``manage.py catalog_watch`` with ``options``, running in a thread of its own (started) until ``stop`` is set
    (or WATCH_SECONDS passed)."""

    def watch() -> None:
        try:
            call_command("catalog_watch", "--duration", WATCH_SECONDS, *options, stop=stop, stdout=StringIO())
        finally:
            connection.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    return watcher


@pytest.fixture
def stop() -> Iterator[threading.Event]:
    """Set at the test's end, whatever happened: no watcher outlives its test."""
    event = threading.Event()
    yield event
    event.set()


@pytest.mark.django_db(transaction=True)
def test_watch_stops_after_its_duration():
    call_command("catalog_watch", "--duration", "0.5", stdout=StringIO())  # returns: nothing else stops it here


@pytest.mark.django_db(transaction=True)
def test_watch_resyncs_a_server_that_announces_a_change(make_server, http_upstream, settings, caplog, stop):
    settings.SCOUT_SYNC_DEBOUNCE = 0
    server = make_server("web", transport=Transport.HTTP, url=http_upstream.url)
    ghost = make_server("ghost", command="scout-no-such-command-xyz")  # a broken server must not stop the rest
    caplog.set_level("INFO", logger="catalog.watch")

    watcher = _watching(stop, "--refresh", "1")
    _until_watching(watcher, caplog, 1)  # a notice sent before the subscription would be lost
    upstream.run_async(lambda: upstream.call_tool(server, "bump", {}, timeout=30))  # adds add_3, announces it
    runs = SyncRun.objects.filter(server=server, source="list_changed")
    _until(watcher, lambda: runs.exclude(status=SyncStatus.RUNNING).exists(), "a re-sync followed the notice")
    # The ghost failed to start and was tried again, with no sync of its own, while the other server was watched.
    _until(watcher, lambda: len(_messages(caplog, "ghost: ")) >= 2, "it tried the ghost again")
    stop.set()
    watcher.join(timeout=60)

    run = runs.get()
    assert run.status == SyncStatus.SUCCESS
    assert "add_3" in set(Tool.objects.filter(server=server).values_list("name", flat=True))
    assert not watcher.is_alive()
    assert not SyncRun.objects.filter(server=ghost).exists()


@pytest.mark.django_db(transaction=True)
def test_a_storm_of_list_changed_notices_from_a_real_server_syncs_it_once_and_others_still_sync(
    make_server, loopback_upstreams, settings, caplog, stop
):
    """F9: one server announces tools/list_changed 1,000 times in one burst, over its real session with the watcher;
    another announces once meanwhile. The notices that pass the per-second bound on unasked messages are heard, the
    stormy server is synced once, the other once too."""
    from mcp.server.mcpserver import Context

    from tests.catalog.servers.http_mcp import serve_http

    settings.SCOUT_SYNC_DEBOUNCE = 30
    notices = 1000

    with serve_http() as stormy_upstream, serve_http() as quiet_upstream:

        async def storm(ctx: Context) -> str:
            """Announce a tool list change again and again."""
            for _ in range(notices):
                await ctx.notify_tools_changed()
            return "stormed"

        stormy_upstream.mcp.add_tool(storm, name="storm")
        stormy = make_server("stormy", transport=Transport.HTTP, url=stormy_upstream.url)
        quiet = make_server("quiet", transport=Transport.HTTP, url=quiet_upstream.url)
        heard = "tools/list_changed; re-sync requested"
        caplog.set_level("INFO", logger="catalog.watch")

        watcher = _watching(stop, "--refresh", "60")
        _until_watching(watcher, caplog, 2)  # both subscribed
        assert upstream.run_async(lambda: upstream.call_tool(stormy, "storm", {}, timeout=30)).content[0].text
        upstream.run_async(lambda: upstream.call_tool(quiet, "bump", {}, timeout=30))
        runs = SyncRun.objects.filter(source="list_changed")

        def heard_and_synced() -> bool:
            slugs = [message.split(":", 1)[0] for message in _messages(caplog, heard)]
            done = runs.exclude(status=SyncStatus.RUNNING).count() >= 2
            return slugs.count("stormy") >= 2 and "quiet" in slugs and done

        _until(watcher, heard_and_synced, "it heard both servers and synced each")
        stop.set()
        watcher.join(timeout=60)

    assert not watcher.is_alive()
    counts = {slug: 0 for slug in ("stormy", "quiet")}
    for message in _messages(caplog, heard):
        counts[message.split(":", 1)[0]] += 1
    # What reaches the watcher of the storm is bounded (catalog.line_guard.UNASKED_PER_SECOND a second, the HTTP
    # transport as stdio: redteam27), so not every notice is heard; many still are, and they make one sync.
    assert counts["quiet"] == 1, counts
    assert 2 <= counts["stormy"] <= notices, counts
    assert sorted(run.server.slug for run in runs) == ["quiet", "stormy"]
    assert all(run.status == SyncStatus.SUCCESS for run in runs)
