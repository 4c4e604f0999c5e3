"""Runs a stdio MCP server with each line it writes to stdout bounded (SECURITY-TESTS C1-28, T13).

The SDK's stdio client keeps what a server writes until the next newline, with no limit, and re-reads all of it
at every chunk that arrives: a server writing without a newline grew the gateway's memory for ever (also after
the call timed out, since a timeout keeps the session) and stalled its event loop, every caller's, for longer
and longer. ``catalog.upstream`` starts every stdio server through this file, as
``python -I -S line_guard.py LIMIT COMMAND [ARGS...]``: the server gets this process's stdin, stderr and
environment, its stdout is passed on unchanged, and it is stopped as soon as a line passes LIMIT bytes. The
session then ends as after a crash (the call fails, the server is started anew on the next call).

Standard library only, and no Django: it runs in its own interpreter, started without site packages.
"""

import os
import subprocess
import sys

CHUNK_BYTES = 64 * 1024


def _write_all(data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


def main(argv: list[str]) -> int:
    limit, command = int(argv[0]), argv[1:]
    try:
        server = subprocess.Popen(command, stdout=subprocess.PIPE)  # noqa: S603 - the operator's configured command
    except OSError as exc:
        sys.stderr.write(f"could not start {command[0]}: {exc.strerror}\n")
        return 127
    line = 0  # bytes written since the last newline
    while chunk := server.stdout.read1(CHUNK_BYTES):
        lengths = [len(piece) for piece in chunk.split(b"\n")]
        lengths[0] += line
        if max(lengths) > limit:
            sys.stderr.write(f"scout: the server wrote a line of more than {limit} bytes to stdout; it was stopped\n")
            server.kill()
            return 1
        line = lengths[-1]
        try:
            _write_all(chunk)
        except BrokenPipeError:  # the gateway closed the session
            server.kill()
            return 1
    return server.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
