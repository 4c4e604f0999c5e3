"""Keep a session open to every active live server and re-sync a server when its tool list changes."""

import logging
import math
import threading
from dataclasses import dataclass, field
from functools import partial

import anyio
from django.core.management.base import BaseCommand, CommandParser
from django.db import connections

from catalog import upstream
from catalog.choices import OPERATOR_STOPPED_STATUSES, Transport
from catalog.models import Server
from catalog.tasks import request_resync

logger = logging.getLogger("catalog.watch")


# Both run on anyio worker threads: each closes its own connection, so no thread holds one between calls
# (they are rare: a refresh a minute, a notice now and then).
def _watched_servers() -> list[Server]:
    """Servers worth a standing connection: MCP transports that are not disabled or archived (an OpenAPI
    service has no change notifications; the beat reconcile re-reads its document)."""
    try:
        return list(
            Server.objects.exclude(status__in=OPERATOR_STOPPED_STATUSES).filter(
                transport__in=[Transport.STDIO, Transport.HTTP]
            )
        )
    finally:
        connections.close_all()


def _resync(server_pk: int) -> None:
    try:
        request_resync(server_pk)
    finally:
        connections.close_all()


def _config(server: Server) -> tuple:
    """What a connection depends on: a change means reconnecting."""
    return (
        server.transport,
        server.command,
        tuple(server.args or []),
        tuple(server.env_vars or []),
        server.url,
        tuple(sorted((server.header_env or {}).items())),
    )


async def _cancel_when_set(stop: threading.Event, scope: anyio.CancelScope) -> None:
    while not stop.is_set():
        await anyio.sleep(0.1)
    scope.cancel()


@dataclass
class Watcher:
    server: Server
    scope: anyio.CancelScope = field(default_factory=anyio.CancelScope)


class Command(BaseCommand):
    help = "Listen for notifications/tools/list_changed from every live server and queue a debounced re-sync."
    # A caller running the watcher in a thread of its own (the tests) passes ``stop``, a threading.Event that ends it
    # as --duration's end does, once what it waited for happened.
    stealth_options = ("stop",)

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--refresh", type=float, default=60.0, help="seconds between re-reading the server list")
        parser.add_argument("--max-backoff", type=float, default=300.0, help="longest wait before reconnecting")
        parser.add_argument("--heartbeat", type=float, default=30.0, help="seconds between liveness checks")
        parser.add_argument("--duration", type=float, default=None, help="stop after this many seconds")

    def handle(self, *args: object, **options: float | None) -> None:
        self.refresh = float(options["refresh"] or 60.0)
        self.max_backoff = float(options["max_backoff"] or 300.0)
        self.heartbeat = float(options["heartbeat"] or 30.0)
        duration = options["duration"]
        anyio.run(self._main, math.inf if duration is None else float(duration), options.get("stop"))

    async def _main(self, duration: float, stop: threading.Event | None) -> None:
        watchers: dict[int, tuple[tuple, Watcher]] = {}
        with anyio.move_on_after(duration):
            async with anyio.create_task_group() as tg:
                if stop is not None:
                    tg.start_soon(_cancel_when_set, stop, tg.cancel_scope)
                while True:
                    servers = {server.pk: server for server in await anyio.to_thread.run_sync(_watched_servers)}
                    for pk in list(watchers):
                        config, watcher = watchers[pk]
                        if pk not in servers or _config(servers[pk]) != config:
                            watcher.scope.cancel()
                            del watchers[pk]
                    for pk, server in servers.items():
                        if pk not in watchers:
                            watcher = Watcher(server=server)
                            watchers[pk] = (_config(server), watcher)
                            tg.start_soon(self._watch, watcher)
                    await anyio.sleep(self.refresh)

    async def _watch(self, watcher: Watcher) -> None:
        server = watcher.server
        backoff = 1.0

        async def on_message(message: object) -> None:
            if upstream.is_tools_list_changed(message):
                logger.info("%s: tools/list_changed; re-sync requested", server.slug)
                await anyio.to_thread.run_sync(_resync, server.pk)

        with watcher.scope:
            reconnecting = False
            while True:
                try:
                    async with upstream.open_session(server, message_handler=on_message) as session:
                        backoff = 1.0
                        if reconnecting:
                            # A change announced while we were disconnected went unheard: fetch once now.
                            await anyio.to_thread.run_sync(_resync, server.pk)
                        # "watching" is said once a notice is heard (the subscription acknowledged), not on connecting.
                        version = session.protocol_version
                        watching = partial(logger.info, "%s: watching (protocol %s)", server.slug, version)
                        await session.listen_for_changes(heartbeat=self.heartbeat, listening=watching)
                    logger.info("%s: the server closed the stream; reconnecting", server.slug)
                except upstream.UpstreamError as exc:
                    logger.warning("%s: %s; reconnecting in %.0fs", server.slug, exc, backoff)
                except Exception:  # a watcher must outlive any one server's surprise
                    logger.exception("%s: watcher failed; reconnecting in %.0fs", server.slug, backoff)
                reconnecting = True
                await anyio.sleep(backoff)
                backoff = min(backoff * 2, self.max_backoff)
