"""uvicorn's HTTP/1.1 protocol with a deadline for each request to arrive.

Stock uvicorn only times out a connection that is idle *between* requests (``timeout_keep_alive``). A client
that connects and sends nothing, or half a request line, or headers and part of the body, holds its
connection (and a file descriptor) for as long as it likes: slowloris. Here the whole request, headers and
body, must arrive within ``SCOUT_HTTP_REQUEST_TIMEOUT`` seconds of the connection opening (or of the
previous response ending, on a kept-alive connection); past it the connection is closed. Streaming a
response is not limited: the clock stops once the request has been read. ``SCOUT_HTTP_KEEP_ALIVE`` sets
uvicorn's idle keep-alive timeout.

A kept-alive connection is also ended after its first response once it is SCOUT_HTTP_CONNECTION_MAX_AGE seconds
old (``Connection: close`` on that response, so the client opens a new connection for its next request): uvicorn's
workers share one listening socket, and the worker whose event loop wakes first accepts every connection waiting
(asyncio accepts up to the backlog in one go), so a client opening its connections at once had them all on one
worker for their whole life (issue 9: 400 of 400 searches of a c=16 run on one of 2 workers, one core used of two).
A new connection goes to the worker that accepts first, the idle one more often than the busy one, so the load
spreads out within a few ages, as gRPC's maximum connection age does behind a balancer.

Used by the documented run command (``uvicorn scoutsite.asgi:application --http
scoutsite.serving:BoundedH11Protocol``, ``make run``) and by ``manage.py demo``.
"""

from __future__ import annotations

import asyncio
import logging
import socket

import h11
from django.conf import settings
from uvicorn.protocols.http.h11_impl import H11Protocol

logger = logging.getLogger("uvicorn.error")

# The run command's protocol, as uvicorn's --http takes it.
PROTOCOL = "scoutsite.serving:BoundedH11Protocol"
CLOSE = (b"connection", b"close")


def no_delay(transport: asyncio.BaseTransport) -> None:
    """TCP_NODELAY on a TCP connection. asyncio sets it only on sockets made with ``proto=IPPROTO_TCP``; the
    socket uvicorn binds itself for ``--workers N`` is made with ``proto=0``, so its connections kept Nagle on:
    the response's head and body went out as two writes, the second held until the client's delayed ACK,
    ~45 ms added to every answer (measured: a short tool_search 8.7 ms with 1 worker, 55.8 ms with 2)."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6) and sock.type == socket.SOCK_STREAM:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


class BoundedH11Protocol(H11Protocol):
    """H11Protocol that closes a connection whose request does not fully arrive in time (module note)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.timeout_keep_alive = settings.SCOUT_HTTP_KEEP_ALIVE
        self.request_deadline: asyncio.TimerHandle | None = None
        self.opened_at = 0.0
        self.aged_cycle = None  # the request cycle whose response ends the connection (module note)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        no_delay(transport)
        self.opened_at = self.loop.time()
        self._arm_request_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_request_deadline()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        self._close_when_aged()

    def _close_when_aged(self) -> None:
        """The request just read gets ``Connection: close`` on its response when the connection has reached
        SCOUT_HTTP_CONNECTION_MAX_AGE (module note); uvicorn then closes the connection once it is sent."""
        cycle, max_age = self.cycle, settings.SCOUT_HTTP_CONNECTION_MAX_AGE
        if cycle is None or cycle is self.aged_cycle or cycle.response_started or max_age <= 0:
            return
        if self.loop.time() - self.opened_at >= max_age:
            self.aged_cycle = cycle
            if CLOSE not in cycle.default_headers:
                cycle.default_headers = [*cycle.default_headers, CLOSE]

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        if self.conn.their_state is not h11.SEND_BODY and self.conn.their_state is not h11.IDLE:
            self._cancel_request_deadline()  # the request is in (DONE), or the connection is ending

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_request_deadline()  # the next request on this connection gets its own deadline

    def _arm_request_deadline(self) -> None:
        self._cancel_request_deadline()
        self.request_deadline = self.loop.call_later(settings.SCOUT_HTTP_REQUEST_TIMEOUT, self._request_too_slow)

    def _cancel_request_deadline(self) -> None:
        if self.request_deadline is not None:
            self.request_deadline.cancel()
            self.request_deadline = None

    def _request_too_slow(self) -> None:
        self.request_deadline = None
        if self.transport.is_closing() or self.conn.their_state is h11.DONE:
            return
        logger.info("%s: closing a connection whose request did not arrive within the request timeout", self.client)
        if self.cycle is not None and not self.cycle.response_complete:
            self.cycle.disconnected = True  # the app reading the body sees http.disconnect
            self.cycle.message_event.set()
        self.transport.close()
