"""An HTTP server that answers a little at a time: each piece comes before any read of the client times out, the
whole far later (a hostile or broken peer holding a worker). Raw sockets, so the headers can drip too."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def dripping(*, where: str, interval: float = 0.1, pieces: int = 60) -> Iterator[tuple[str, list[float]]]:
    """A server on 127.0.0.1 answering 200 in ``pieces`` bytes ``interval`` seconds apart: its header lines
    (``where="headers"``) or its body after whole headers (``where="body"``). Yields its URL and, per answer it
    finished sending, the seconds it took (empty while the client gave up on every answer first)."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    finished: list[float] = []
    stop = threading.Event()

    def answer(conn: socket.socket) -> None:
        started = time.monotonic()
        with conn:
            conn.settimeout(5)
            request = b""
            while b"\r\n\r\n" not in request:
                request += conn.recv(65536)
            head, _, body = request.partition(b"\r\n\r\n")
            length = next(
                (
                    int(line.split(b":")[1])
                    for line in head.lower().split(b"\r\n")
                    if line.startswith(b"content-length:")
                ),
                0,
            )
            while len(body) < length:  # read the whole request: closing on unread bytes resets the connection
                body += conn.recv(65536)
            head = b"HTTP/1.1 200 OK\r\n"
            if where == "body":
                head += b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % pieces
                conn.sendall(head)
                dripped, tail = b"x" * pieces, b""
            else:
                conn.sendall(head)
                dripped, tail = b"X-Drip: " + b"a" * max(pieces - 8, 0), b"\r\nContent-Length: 2\r\n\r\n{}"
            try:
                for byte in dripped:
                    if stop.wait(interval):
                        return
                    conn.sendall(bytes([byte]))
                conn.sendall(tail)
            except OSError:  # the client gave up and closed the connection
                return
            finished.append(time.monotonic() - started)

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=answer, args=(conn,), daemon=True).start()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", finished
    finally:
        stop.set()
        server.join(5)
        listener.close()
