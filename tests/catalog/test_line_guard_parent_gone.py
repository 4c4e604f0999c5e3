"""A stdio server whose gateway or Celery worker was killed outright is stopped (opsux7).

Every stdio server runs under catalog/line_guard.py. The SDK ends a session by closing the server's stdin and stops
a server still running 2 s later; a worker killed with SIGKILL (the OOM killer, a hard restart) stops nothing: the
kernel only closes the guard's stdin. A server that does not read its stdin (a hung one) then ran on for ever,
reparented to init, one more at each kill. Here the guard's stdin is closed as the kernel closes it."""

import os
import subprocess
import sys
from pathlib import Path

import catalog.line_guard as line_guard

HUNG = "import os, sys, time; sys.stderr.write(f'pid {os.getpid()}\\n'); sys.stderr.flush(); time.sleep(3600)"


def test_a_server_that_ignores_the_end_of_its_stdin_is_killed_when_its_parent_is_gone():
    guard = subprocess.Popen(
        [sys.executable, "-I", "-S", Path(line_guard.__file__), "4194304", "1048576", sys.executable, "-c", HUNG],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    server_pid = int(guard.stderr.readline().split()[1])  # started, asleep, never reading stdin
    try:
        guard.stdin.close()  # the parent gone: all the guard ever hears of it
        assert guard.wait(timeout=30) != 0  # it ran until the server was killed (before: for ever)
        try:
            os.kill(server_pid, 0)
        except ProcessLookupError:
            pass
        else:
            raise AssertionError(f"the hung server {server_pid} still runs")
    finally:
        guard.kill()
        guard.wait()
        try:
            os.kill(server_pid, 9)
        except ProcessLookupError:
            pass
