"""A circuit breaker per upstream server (SECURITY-TESTS F3).

After ``SCOUT_UPSTREAM_BREAKER_FAILURES`` consecutive failures of a server (timeouts, refused or broken
connections, crashes, protocol errors: a tool's own ``isError`` result is not one) within
``SCOUT_UPSTREAM_BREAKER_WINDOW`` seconds, the breaker opens: calls fail at once, without reaching the server,
for ``SCOUT_UPSTREAM_BREAKER_COOLDOWN`` seconds. Then it is half-open: one call goes through as a probe while
the others keep failing fast; the probe's success closes it, its failure opens it again for a new cool-down.

Who failed: a call that failed after it was sent (no answer in time, the process exiting or the connection reset
mid-call, a 5xx answer, an error in place of its result) may have failed for its own tool or arguments, while the
server answers everyone else: a slow tool, or the one input a server's bug exits on. So such a failure counts toward
a breaker of that caller on that server (``caller_breaker_for``), which refuses that caller alone; the server's breaker
opens once a second caller's own breaker has opened within the window (``CALLERS_TO_OPEN``): failing for several
people, the server is failing. What fails before a call is sent (the server cannot be reached, started or spoken to)
counts toward the server's breaker as before. One person calling a slow tool until it timed out (redteam53), or
sending the input that crashed a shared server or made it answer 503 (redteam56), cut it off for every other person.

The state lives in the process that calls the server (the gateway's upstream pool): with several workers each
has its own breaker, so a failing server is cut off by each worker after its own N failures. ``/metrics``
shows the worst state over live workers; the admin shows the state of the worker that served the page.
This module is plain state, with no I/O, so the pool (MCP and OpenAPI alike) and the admin can both use it.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any

from django.conf import settings

CLOSED, HALF_OPEN, OPEN = "closed", "half_open", "open"
LEVELS = {CLOSED: 0, HALF_OPEN: 1, OPEN: 2}  # the metric's values: higher is worse


@dataclass
class CircuitBreaker:
    """The breaker of one server. Thresholds are read from settings at each decision, so a changed setting
    applies without a restart. ``now`` is a ``time.monotonic()`` value."""

    state: str = CLOSED
    failures: int = 0
    first_failure_at: float = 0.0
    opened_at: float = 0.0
    probing: bool = False
    opened_count: int = 0

    def admit(self, now: float) -> float | None:
        """None when a call may go to the server (as the probe, when half-open); otherwise the seconds left
        before the next probe may go."""
        cooldown = float(settings.SCOUT_UPSTREAM_BREAKER_COOLDOWN)
        if self.state == CLOSED:
            return None
        left = self.opened_at + cooldown - now
        if self.state == OPEN and left > 0:
            return left
        if self.probing:  # one probe at a time: the others fail fast until it has answered
            return max(left, 1.0)
        self.state = HALF_OPEN
        self.probing = True
        return None

    def succeeded(self) -> None:
        self.state, self.failures, self.probing = CLOSED, 0, False

    def failed(self, now: float) -> None:
        """A failure of the server itself: opens the breaker at the threshold, or at once after a probe."""
        if self.state == HALF_OPEN:
            self._open(now)
            return
        if self.failures and now - self.first_failure_at > float(settings.SCOUT_UPSTREAM_BREAKER_WINDOW):
            self.failures = 0  # old failures: a flaky server with long good stretches stays in use
        if self.failures == 0:
            self.first_failure_at = now
        self.failures += 1
        if self.failures >= int(settings.SCOUT_UPSTREAM_BREAKER_FAILURES):
            self._open(now)

    def settled(self) -> None:
        """The call ended without telling whether the server works (the bulkhead was full, the caller went
        away): a probe that did not test anything lets the next call probe instead."""
        self.probing = False

    def _open(self, now: float) -> None:
        self.state, self.opened_at, self.probing = OPEN, now, False
        self.opened_count += 1


# Callers whose own breakers opened on a server within the window (SCOUT_UPSTREAM_BREAKER_WINDOW) that open the
# server's: two, so one caller, however often their calls fail, never cuts the server off for anyone else.
CALLERS_TO_OPEN = 2

_lock = threading.Lock()
_breakers: dict[int, CircuitBreaker] = {}
_caller_breakers: dict[tuple[int, Any], CircuitBreaker] = {}


def breaker_for(server_pk: int) -> CircuitBreaker:
    """This process's breaker of a server (created closed)."""
    with _lock:
        return _breakers.setdefault(server_pk, CircuitBreaker())


def caller_breaker_for(server_pk: int, caller: Any) -> CircuitBreaker:
    """This process's breaker of one caller (a person's key) on a server, counting that caller's timeouts only: a
    fresh closed one, kept only once it counts a failure (``caller_breaker_failed``), so a process keeps one per
    caller whose calls time out, not one per caller and server it ever served."""
    with _lock:
        return _caller_breakers.get((server_pk, caller)) or CircuitBreaker()


def caller_breaker_failed(server_pk: int, caller: Any, breaker: CircuitBreaker, now: float) -> None:
    """A call of ``caller`` failed after it was sent: it counts toward the caller's own breaker; when that opens and
    another caller's opened within the window too, the server's opens (``CALLERS_TO_OPEN``)."""
    window = float(settings.SCOUT_UPSTREAM_BREAKER_WINDOW)
    with _lock:
        own = _caller_breakers.setdefault((server_pk, caller), breaker)  # the one kept, if another call failed first
        opened = own.opened_count
        own.failed(now)
        if own.opened_count == opened:
            return
        out = sum(
            1
            for (pk, _), other in _caller_breakers.items()
            if pk == server_pk and other.state != CLOSED and now - other.opened_at <= window
        )
        server = _breakers.setdefault(server_pk, CircuitBreaker())
        if out >= CALLERS_TO_OPEN and server.state != OPEN:
            server._open(now)


def caller_breaker_succeeded(server_pk: int, caller: Any, breaker: CircuitBreaker) -> None:
    with _lock:
        breaker.succeeded()
        _caller_breakers.pop((server_pk, caller), None)  # closed, nothing counted: a fresh one is the same


def breaker_forget(server_pk: int | None = None) -> None:
    """Drop one server's breakers, its callers' too (its configuration changed: give it a fresh start), or all."""
    with _lock:
        if server_pk is None:
            _breakers.clear()
            _caller_breakers.clear()
        else:
            _breakers.pop(server_pk, None)
            for key in [key for key in _caller_breakers if key[0] == server_pk]:
                del _caller_breakers[key]


def breaker_state(server_pk: int) -> str:
    """The state of a server's breaker in this process (closed when it was never called here)."""
    breaker = _breakers.get(server_pk)
    return breaker.state if breaker is not None else CLOSED
