"""pytest-django's live server with request threads that live on, each keeping its database connection.

Django's live server (``ThreadedWSGIServer``) serves each connection in a new thread and closes that thread's
database connections after it: on Postgres every request opened a new connection (a server process forked, the
session set up; some 20 ms on a loaded machine), for each API call and each page a browser test loads. Here the
threads are a pool's: a thread serves one client connection at a time, as before, and a new one starts when every
thread is busy (a browser's kept-alive connections each hold one), so requests never wait for each other. A
connection a request thread opened is kept for its next request, with Django's own checks at each request's start
and end (closed when broken, errored and unusable, or left outside autocommit); all are closed when the server
stops, before the test database is dropped.
"""

import queue
import threading

from django.core.servers.basehttp import ThreadedWSGIServer
from django.db.backends.signals import connection_created

THREAD_PREFIX = "scout-live-server"


def _keep(sender, connection, **kwargs) -> None:
    """A connection opened by a request thread is not obsolete at the end of its request (CONN_MAX_AGE=0 would)."""
    if threading.current_thread().name.startswith(THREAD_PREFIX):
        connection.close_at = None
        KeptConnectionsWSGIServer.kept.append(connection)


class KeptConnectionsWSGIServer(ThreadedWSGIServer):
    kept: list = []  # every connection a request thread opened, closed at the server's stop

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)  # one token per thread waiting for a job
        self._started = 0
        connection_created.connect(_keep)

    def process_request(self, request, client_address) -> None:
        self._jobs.put((request, client_address))
        if not self._idle.acquire(blocking=False):
            self._started += 1
            name = f"{THREAD_PREFIX}-{self._started}"
            threading.Thread(target=self._serve, name=name, daemon=True).start()  # as Django's: daemons

    def _serve(self) -> None:
        while (job := self._jobs.get()) is not None:
            self.process_request_thread(*job)
            self._idle.release()

    def _close_connections(self) -> None:
        """Left to Django's end-of-request check (``close_old_connections``), which drops a broken connection."""

    def server_close(self) -> None:
        super().server_close()
        for _ in range(self._started):
            self._jobs.put(None)
        connection_created.disconnect(_keep)
        kept, KeptConnectionsWSGIServer.kept = KeptConnectionsWSGIServer.kept, []
        for connection in kept:
            if connection.connection is not None:
                connection.connection.close()  # the driver's own: the wrapper belongs to its (idle) thread
                connection.connection = None
