"""uvicorn's HTTP/1.1 protocol with a deadline for each request to arrive.

Stock uvicorn only times out a connection that is idle *between* requests (``timeout_keep_alive``). A client
that connects and sends nothing, or half a request line, or headers and part of the body, holds its
connection (and a file descriptor) for as long as it likes: slowloris. Here the whole request, headers and
body, must arrive within ``SCOUT_HTTP_REQUEST_TIMEOUT`` seconds of the connection opening (or of the
previous response ending, on a kept-alive connection); past it the connection is closed. Streaming a
response is not limited: the clock stops once the request has been read. ``SCOUT_HTTP_KEEP_ALIVE`` sets
uvicorn's idle keep-alive timeout.

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

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        no_delay(transport)
        self._arm_request_deadline()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_request_deadline()
        super().connection_lost(exc)

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
