"""Progress of long work: one callback shape, shown as a bar on a terminal, plain lines elsewhere, and
recorded on rows (IndexGeneration, SyncRun) for the admin.

Every long job reports through a ``ProgressCallback``: ``progress(done, total)`` with absolute counts, so
a caller never keeps a second copy of the counting. It lives in ``catalog`` (the bottom layer) so that
``search`` and ``mcpgateway`` commands can use it without importing upward.
"""

import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Protocol, TextIO

from django.core.management.base import BaseCommand, CommandParser
from django.utils import timezone
from tqdm import tqdm

ProgressCallback = Callable[[int, int], None]

PLAIN_STEP_PERCENT = 10  # plain (non-TTY) output: one line per this many percent
RECORD_MIN_SECONDS = 1.0  # rows are written at most this often ...
RECORD_MIN_FRACTION = 0.05  # ... unless the work moved on by this fraction of the total


def progress_none(done: int, total: int) -> None:
    """The callback for callers that do not watch."""


def progress_throttled(
    record: ProgressCallback,
    *,
    min_seconds: float = RECORD_MIN_SECONDS,
    min_fraction: float = RECORD_MIN_FRACTION,
) -> ProgressCallback:
    """Call ``record`` at most every ``min_seconds`` unless ``min_fraction`` of the total passed, and always
    for the first and the last report: a 10,000-tool build must not write a row per batch."""
    last: dict[str, float] = {"at": float("-inf"), "done": float("-inf")}

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        step = total * min_fraction if total else 0
        if done < total and now - last["at"] < min_seconds and done - last["done"] < step:
            return
        last["at"], last["done"] = now, done
        record(done, total)

    return report


def progress_chain(*callbacks: ProgressCallback | None) -> ProgressCallback:
    """One callback that tells each of ``callbacks`` (None ones are skipped)."""
    live = [c for c in callbacks if c is not None]

    def report(done: int, total: int) -> None:
        for callback in live:
            callback(done, total)

    return report


class ProgressSum:
    """Several calls that each report their own ``(done, total)``, shown as one running count: the
    total grows as calls start (an evaluation encodes tools, then negatives, then queries)."""

    def __init__(self, progress: ProgressCallback) -> None:
        self.progress = progress
        self.done = self.total = 0

    def part(self) -> ProgressCallback:
        """The callback for one more call."""
        base_done, started = self.done, False

        def report(done: int, total: int) -> None:
            nonlocal started
            if not started:
                started = True
                self.total += total
            self.done = base_done + done
            self.progress(self.done, self.total)

        return report


def progress_estimate(*, done: int, total: int, started_at: datetime, now: datetime | None = None) -> float | None:
    """Seconds left at the rate so far, or None before the first item (no rate to go by)."""
    if done <= 0 or total <= 0 or done >= total:
        return None if done < total or total <= 0 else 0.0
    elapsed = ((now or timezone.now()) - started_at).total_seconds()
    return max(0.0, elapsed * (total - done) / done)


class _Stream(Protocol):
    def write(self, text: str, /) -> Any: ...

    def flush(self) -> Any: ...


def progress_is_interactive(stream: Any, *, disabled: bool = False) -> bool:
    """A bar only on a terminal: not in CI (``CI`` set, as every CI service does), not under ``--no-progress``."""
    if disabled or os.environ.get("CI", "").strip().lower() not in ("", "0", "false"):
        return False
    isatty = getattr(stream, "isatty", None)
    try:
        return bool(isatty and isatty())
    except ValueError:  # a closed stream
        return False


class ProgressReporter:
    """Shows one job's progress on ``stream``: a tqdm bar (done of total, rate, time left) when
    ``interactive``, else plain lines at the start, every PLAIN_STEP_PERCENT and the end; nothing when
    ``quiet``. Use it as the job's ``progress`` callback, then ``close()``."""

    def __init__(self, stream: _Stream, label: str, *, unit: str, interactive: bool, quiet: bool = False) -> None:
        self.stream, self.label, self.unit = stream, label, unit
        self.interactive, self.quiet = interactive, quiet
        self.bar: tqdm | None = None
        self.done = self.total = 0
        self.next_percent = PLAIN_STEP_PERCENT
        self.started = time.monotonic()
        self.closed = False

    def __call__(self, done: int, total: int) -> None:
        if self.quiet or self.closed:
            return
        if self.interactive:
            self._bar_update(done, total)
        else:
            self._line_update(done, total)
        self.done, self.total = done, total

    def _bar_update(self, done: int, total: int) -> None:
        if self.bar is None:
            # dynamic_ncols off: a StringIO or pipe has no width; 100 columns fit any terminal worth using.
            self.bar = tqdm(total=total, desc=self.label, unit=self.unit, file=self.stream, ncols=100, leave=True)
        if total != self.bar.total:
            self.bar.total = total
        self.bar.update(done - self.bar.n)

    def _line_update(self, done: int, total: int) -> None:
        if self.done == 0 and self.total == 0:
            self._line(f"{self.label}: started, {total} {self.unit}")
        if total <= 0:
            return
        percent = done * 100 // total
        if percent >= self.next_percent and done < total:
            self._line(f"{self.label}: {percent}% ({done}/{total} {self.unit})")
            self.next_percent = (percent // PLAIN_STEP_PERCENT + 1) * PLAIN_STEP_PERCENT

    def _line(self, text: str) -> None:
        self.stream.write(text + "\n")
        self.stream.flush()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.quiet:
            return
        if self.bar is not None:
            self.bar.close()
            return
        if self.interactive:
            return  # never started: nothing to finish
        seconds = time.monotonic() - self.started
        if self.done == 0 and self.total == 0:
            self._line(f"{self.label}: nothing to do")
        else:
            self._line(f"{self.label}: done, {self.done}/{self.total} {self.unit} in {seconds:.1f}s")


@contextmanager
def progress_reporter(
    stream: Any, label: str, *, unit: str = "items", disabled: bool = False, quiet: bool = False
) -> Iterator[ProgressReporter]:
    """A ProgressReporter for ``stream`` that is closed (bar finished, last line written) on exit."""
    reporter = ProgressReporter(
        stream, label, unit=unit, interactive=progress_is_interactive(stream, disabled=disabled), quiet=quiet
    )
    try:
        yield reporter
    finally:
        reporter.close()


class ProgressCommand(BaseCommand):
    """A management command whose long steps show their progress on stderr (stdout stays the report, so it
    can be piped while the bar shows on the terminal). ``--no-progress`` gives plain lines; ``--verbosity 0``
    shows nothing (errors still print)."""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parser = super().create_parser(prog_name, subcommand, **kwargs)
        parser.add_argument(
            "--no-progress", action="store_true", help="No progress bar: a few plain lines (start, every 10%%, end)"
        )
        return parser

    def execute(self, *args: Any, **options: Any) -> Any:
        self.progress_quiet = int(options.get("verbosity", 1)) == 0
        self.progress_disabled = bool(options.get("no_progress", False))
        return super().execute(*args, **options)

    def progress(self, label: str, *, unit: str = "items") -> Any:
        """A context manager yielding the callback for one step: ``with self.progress("encoding") as p:``."""
        return progress_reporter(
            _raw_stream(self.stderr),
            label,
            unit=unit,
            disabled=getattr(self, "progress_disabled", False),
            quiet=getattr(self, "progress_quiet", False),
        )


def _raw_stream(wrapper: Any) -> TextIO:
    # Django's OutputWrapper appends a newline to every write; tqdm redraws with "\r", so it needs the stream.
    return getattr(wrapper, "_out", wrapper) or sys.stderr


class ProgressRow(Protocol):
    """A row that records a run's progress (SyncRun, IndexGeneration)."""

    status: str
    progress_done: int
    progress_total: int
    started_at: datetime
    finished_at: datetime | None


def progress_snapshot(
    row: ProgressRow,
    *,
    running: bool,
    stage: str,
    unit: str,
    error: str = "",
    typical_seconds: float | None = None,
) -> dict[str, Any]:
    """What the admin's progress poll shows of one run, and nothing else: ``row``'s status, counts and times, the
    stage and the error.

    ``typical_seconds`` (a previous run's duration) stands in for the estimate while the run has no count
    to go by (a sync waiting on its upstream)."""
    status, done, total = row.status, row.progress_done, row.progress_total
    started_at, finished_at = row.started_at, row.finished_at
    now = timezone.now()
    eta = progress_estimate(done=done, total=total, started_at=started_at, now=now) if running else None
    if running and eta is None and typical_seconds is not None:
        eta = max(0.0, typical_seconds - (now - started_at).total_seconds())
    end = finished_at or now
    return {
        "running": running,
        "status": status,
        "stage": stage,
        "unit": unit,
        "done": done,
        "total": total,
        "percent": round(100 * done / total, 1) if total else None,
        "elapsed_seconds": round((end - started_at).total_seconds(), 1),
        "eta_seconds": None if eta is None else round(eta, 1),
        "duration_seconds": None if running or finished_at is None else round((end - started_at).total_seconds(), 2),
        "error": error,
    }
