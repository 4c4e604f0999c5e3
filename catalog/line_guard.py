"""Runs a stdio MCP server with its output bounded: each line it writes to stdout, and what it keeps of its stderr
(SECURITY-TESTS C1-28, T13).

The SDK's stdio client keeps what a server writes until the next newline, with no limit, and re-reads all of it
at every chunk that arrives: a server writing without a newline grew the gateway's memory for ever (also after
the call timed out, since a timeout keeps the session) and stalled its event loop, every caller's, for longer
and longer. Its stderr went straight to a file the gateway trimmed only when it called the server: a server
writing to stderr while idle filled the disk (3.6 GB in 6 s here).

``catalog.upstream`` starts every stdio server through this file, as
``python -I -S line_guard.py LINE_LIMIT STDERR_LIMIT COMMAND [ARGS...]``: the server gets this process's environment,
and its stdin passed on line by line (the ids of the gateway's requests noted, ``Outstanding``); its stdout is passed
on line by line, and it is stopped as soon as a line passes LINE_LIMIT bytes (the session then ends, the server is
started anew on the next call; the call fails as after a crash, or as an output too large when the line was its
answer: ``ANSWER_TOO_LONG``), a line that is not a JSON-RPC message is dropped and a lone surrogate escape made
U+FFFD, and past ``UNASKED_PER_SECOND`` a second a message that is not the first answer to a request the gateway sent
is dropped (``Stdout``); its stderr is passed on to this process's stderr (the gateway's file), emptied whenever it
holds more than STDERR_LIMIT bytes.

Standard library only, and no Django: it runs in its own interpreter, started without site packages.
"""

import fcntl
import json
import os
import re
import stat
import subprocess
import sys
import threading
import time

CHUNK_BYTES = 64 * 1024
# How long a server that ended may take to have its last stderr copied, at most: a child of it may hold the pipe open.
STDERR_DRAIN_SECONDS = 2.0
# How long a server may go on once its stdin has ended before it is killed. The SDK ends a session by closing stdin
# and stops a server still running 2 s later; a gateway or Celery worker killed outright (SIGKILL, the OOM killer)
# stops nothing, and a server that does not read stdin (a hung one) ran on for ever, one more at each kill (opsux7).
STDIN_END_GRACE_SECONDS = 3.0


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _pass_stderr(stream, limit: int) -> None:
    """Copy the server's stderr to ours; a file past ``limit`` bytes is emptied first (the gateway reads its tail)."""
    if stat.S_ISREG(os.fstat(2).st_mode):  # appended to wherever the end is, also after it was emptied
        fcntl.fcntl(2, fcntl.F_SETFL, fcntl.fcntl(2, fcntl.F_GETFL) | os.O_APPEND)
    while chunk := stream.read1(CHUNK_BYTES):
        kept = os.fstat(2)
        if stat.S_ISREG(kept.st_mode) and kept.st_size > limit:
            os.ftruncate(2, 0)
        _write_all(2, chunk)


class LineTooLong(Exception):
    pass


# What this process says on stderr when it stops a server whose too-long line was the answer to a call (a JSON-RPC
# response: "result" among its first keys), which ``catalog.upstream`` reads as "the answer was too large": the call
# ran. Any other too-long line (a notification written for ever) reads as a crash, as before.
ANSWER_TOO_LONG = "scout: the server's answer to a call was a line of more than"
_RESPONSE_START = re.compile(rb'\s*\{\s*(?:"(?:jsonrpc|id)"\s*:\s*(?:"[^"]*"|-?\d+)\s*,\s*){0,2}"result"\s*:')


# A JSON escape of a UTF-16 surrogate (``\ud800``) decodes to a character only as a high one followed by a low one.
# Matched from the left, every backslash with what it escapes, so an escaped backslash before "ud800" is text.
_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")
_ESCAPES = re.compile(
    rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})|\\.", re.DOTALL
)


def _lone_surrogates_replaced(line: bytes) -> bytes:
    """``line`` with every lone surrogate escape made ``\ufffd``: the SDK cannot parse such a line and dropped it, so
    the answer it carried never came and the call waited for its timeout (C1-27; invalid UTF-8 reads as U+FFFD too)."""
    if not _SURROGATE_ESCAPE.search(line):
        return line
    return _ESCAPES.sub(lambda m: rb"\ufffd" if m.group(1) else m.group(0), line)


# Messages a server sends unasked (notifications, its own requests, anything but an answer to the gateway's request)
# passed on a second, at most. Each costs the gateway's event loop, every client's, a parse (and a callback): a server
# writing valid log notifications while idle slowed a listing of its own from 6 ms to 1.5 s and made a 10 ms sleep in
# the same loop take 16 ms. Scout uses none but tools/list_changed, which a burst of coalesces into one sync (F9).
UNASKED_PER_SECOND = 100


class Budget:
    """At most ``per_second`` takes in each second; ``dropped`` counts the refused ones."""

    def __init__(self, per_second: int) -> None:
        self.per_second = per_second
        self.second = -1
        self.taken = 0
        self.dropped = 0

    def take(self) -> bool:
        now = int(time.monotonic())
        if now != self.second:
            self.second, self.taken = now, 0
        if self.taken < self.per_second:
            self.taken += 1
            return True
        self.dropped += 1
        return False


# Requests of the gateway's awaiting their answer, the newest kept per session: a server that never answers some (a
# call cancelled at its timeout), or answers with a JSON body over HTTP (not read here), does not grow it for ever.
# The gateway has a few in flight per session at once (SCOUT_MCP_MAX_CALLS_PER_SERVER and listings).
KEPT_REQUESTS = 1_000


def _message(data: bytes) -> dict | None:
    try:
        message = json.loads(data.decode("utf-8", "replace"))
    except (ValueError, RecursionError):  # RecursionError: nested past what the parser reads
        return None
    return message if isinstance(message, dict) else None


def _request_key(value: object) -> int | str | None:
    """A request id as the SDK matches an answer to it (``coerce_request_id``: a string of an integer is that
    integer); None for what is no id."""
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            return value
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class Outstanding:
    """The ids of the requests the gateway sent that the server has not answered yet. The first answer to each is
    what the gateway asked for; an answer to an id it never sent, or already answered, is unasked like a notification
    (the SDK parses and validates it before dropping it), so a server cannot pass any number of them by their shape
    (redteam30). The newest ``KEPT_REQUESTS`` are kept."""

    def __init__(self) -> None:
        self._ids: dict[int | str, bool] = {}  # in the order sent
        self._lock = threading.Lock()  # line_guard notes requests on another thread than it reads answers

    def sent(self, data: bytes) -> None:
        """Note ``data`` (a message the gateway sent) when it is a request: an object with a method and an id."""
        message = _message(data)
        key = _request_key(message.get("id")) if message is not None and "method" in message else None
        if key is not None:
            with self._lock:
                self._ids[key] = True
                if len(self._ids) > KEPT_REQUESTS:
                    del self._ids[next(iter(self._ids))]

    def answered(self, data: bytes) -> bool:
        """Whether ``data`` is the first answer to a request noted as sent (an object with its id and a result or an
        error, and no method); that request is then answered."""
        message = _message(data)
        if message is None or "method" in message or ("result" not in message and "error" not in message):
            return False
        key = _request_key(message.get("id"))
        with self._lock:
            return key is not None and self._ids.pop(key, False)


class Stdout:
    """What of the server's stdout goes on: its lines that may be JSON-RPC messages (which are objects), each at most
    ``limit`` bytes, passed on whole once their newline came, lone surrogate escapes replaced. The SDK logs every
    other line with a traceback, and reads the answers behind them only as fast as it logs: a server writing lines
    of text had the gateway log some 1,400 tracebacks a second while its calls timed out. Such a line is dropped,
    and the count of them told on stderr at 1, 10, 100... ."""

    def __init__(self, limit: int, outstanding: Outstanding) -> None:
        self.limit = limit
        self.outstanding = outstanding
        self.length = 0  # bytes of the line so far
        self.message: bool | None = None  # whether the line starts an object; None while only whitespace came
        self.pieces: list[bytes] = []  # the line so far, while it may be a message (at most ``limit`` bytes)
        self.dropped = 0
        self.unasked = Budget(UNASKED_PER_SECOND)

    def passed(self, chunk: bytes) -> bytes:
        """The whole lines of ``chunk`` (with what came of them before) to pass on. Raises LineTooLong."""
        kept = []
        *whole, rest = chunk.split(b"\n")
        for piece in whole:
            self._read(piece)
            if self.message:
                line = _lone_surrogates_replaced(b"".join(self.pieces))
                if self.outstanding.answered(line) or self.unasked.take():
                    kept.append(line + b"\n")
                elif str(self.unasked.dropped).rstrip("0") == "1":
                    sys.stderr.write(
                        f"scout: dropped {self.unasked.dropped} message(s) the gateway did not ask for, past "
                        f"{UNASKED_PER_SECOND} a second\n"
                    )
            elif self.message is False:
                self.dropped += 1
                if str(self.dropped).rstrip("0") == "1":
                    sys.stderr.write(f"scout: dropped {self.dropped} line(s) of stdout that were not JSON-RPC\n")
            self.length, self.message, self.pieces = 0, None, []
        self._read(rest)
        return b"".join(kept)

    def answering(self) -> bool:
        """Whether the line so far starts as the answer to a request (a JSON-RPC response with a result)."""
        return _RESPONSE_START.match(b"".join(self.pieces)[:256]) is not None

    def _read(self, piece: bytes) -> None:
        self.length += len(piece)
        if self.length > self.limit:
            raise LineTooLong
        if self.message is None and piece.strip():
            self.message = piece.lstrip().startswith(b"{")
        if self.message is not False:
            self.pieces.append(piece)


def _pass_stdin(server: subprocess.Popen, outstanding: Outstanding) -> None:
    """Pass the gateway's messages on to the server as they come, noting its requests (``Outstanding``) before the
    newline that completes each is passed on; the server's stdin is closed when ours ends (the gateway ending the
    session, or gone), and the server killed if it still runs ``STDIN_END_GRACE_SECONDS`` later. Unbuffered reads
    and writes: a daemon thread blocked in a buffered stream's read holds its lock, and the interpreter aborted at
    exit ("could not acquire lock for <stdin>") once the server had ended."""
    server_stdin = server.stdin
    fd, line = server_stdin.fileno(), bytearray()
    try:
        while chunk := os.read(0, CHUNK_BYTES):
            *whole, rest = chunk.split(b"\n")
            for piece in whole:
                outstanding.sent(bytes(line + piece))
                line.clear()
            line += rest
            _write_all(fd, chunk)
    except OSError:  # BrokenPipeError: the server is gone; its stdout's end ends this process
        pass
    finally:
        try:
            server_stdin.close()
        except OSError:
            pass
    try:
        server.wait(timeout=STDIN_END_GRACE_SECONDS)
    except subprocess.TimeoutExpired:
        server.kill()  # its stdout ends, and with it this process


def main(argv: list[str]) -> int:
    limit, stderr_limit, command = int(argv[0]), int(argv[1]), argv[2:]
    try:
        pipes = {"stdin": subprocess.PIPE, "stdout": subprocess.PIPE, "stderr": subprocess.PIPE}
        server = subprocess.Popen(command, **pipes)  # noqa: S603 - configured
    except OSError as exc:
        sys.stderr.write(f"could not start {command[0]}: {exc.strerror}\n")
        return 127
    passing_stderr = threading.Thread(target=_pass_stderr, args=(server.stderr, stderr_limit), daemon=True)
    passing_stderr.start()
    outstanding = Outstanding()
    threading.Thread(target=_pass_stdin, args=(server, outstanding), daemon=True).start()
    stdout = Stdout(limit, outstanding)
    while chunk := server.stdout.read1(CHUNK_BYTES):
        try:
            _write_all(1, stdout.passed(chunk))
        except LineTooLong:
            written = ANSWER_TOO_LONG if stdout.answering() else "scout: the server wrote a line of more than"
            sys.stderr.write(f"{written} {limit} bytes to stdout; it was stopped\n")
            server.kill()
            return 1
        except BrokenPipeError:  # the gateway closed the session
            server.kill()
            return 1
    status = server.wait()
    # What the server wrote to stderr as it ended is in the gateway's file before this process exits and its stdout
    # closes, which is when the gateway reads that file to say why the server died: the daemon thread copying it was
    # cut off by the exit, and a failure then said only "closed the connection" (stop 38's CI, once).
    passing_stderr.join(STDERR_DRAIN_SECONDS)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
