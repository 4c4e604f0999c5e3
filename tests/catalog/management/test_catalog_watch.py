"""manage.py catalog_watch: a server announcing tools/list_changed gets re-synced."""

import threading
import time
from io import StringIO

import pytest
from django.core.management import call_command
from django.db import connection

from catalog import upstream
from catalog.choices import SyncStatus, Transport
from catalog.models import SyncRun, Tool

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


@pytest.mark.django_db(transaction=True)
def test_watch_resyncs_a_server_that_announces_a_change(make_server, http_upstream, settings):
    settings.SCOUT_SYNC_DEBOUNCE = 0
    server = make_server("web", transport=Transport.HTTP, url=http_upstream.url)
    ghost = make_server("ghost", command="scout-no-such-command-xyz")  # a broken server must not stop the rest

    def watch() -> None:
        try:
            call_command("catalog_watch", "--duration", "6", "--refresh", "1", stdout=StringIO())
        finally:
            connection.close()

    watcher = threading.Thread(target=watch)
    watcher.start()
    time.sleep(1.5)  # connected and subscribed
    upstream.run_async(lambda: upstream.call_tool(server, "bump", {}, timeout=5))  # adds add_3, announces it
    deadline = time.monotonic() + 4
    while not SyncRun.objects.filter(server=server, source="list_changed").exists():
        assert time.monotonic() < deadline, "no re-sync followed the tools/list_changed notice"
        time.sleep(0.1)
    watcher.join(timeout=15)

    run = SyncRun.objects.get(server=server, source="list_changed")
    assert run.status == SyncStatus.SUCCESS
    assert "add_3" in set(Tool.objects.filter(server=server).values_list("name", flat=True))
    assert not watcher.is_alive()
    assert not SyncRun.objects.filter(server=ghost).exists()
