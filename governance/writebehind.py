"""Records written behind the request: discovery audit events and query-log rows, inserted in batches.

A tool_search wrote two rows in its own request (an audit event and a query-log entry). On SQLite every
write takes the database's one write lock, so under load searches queued behind each other's inserts
(issue 9: ~25 ms per search, serialised across workers). Discovery records are instead appended to this
process's queue and a daemon thread inserts them every SCOUT_WRITE_BEHIND_SECONDS in one transaction (one
lock, one commit for the batch). Nothing is read or updated: the rows are complete when queued.

Only records whose loss in a crash is acceptable come here: an execution's audit event is written before
its result is returned (``audit_record`` without ``deferred``). On a normal shutdown the queue is flushed:
by the gateway's lifespan end (uvicorn's SIGINT or SIGTERM: uvicorn then re-raises the signal, so ``atexit``
never runs there), and by an ``atexit`` hook for the rest (``manage.py`` commands, the end of a Celery worker).
A batch the database cannot take now (``TRANSIENT``: locked, busy, connection lost) is put back and retried, nothing
lost. Any other failure is a row's fault, not the database's (a data or integrity error, a value that cannot be
sent): retried, it would fail for ever and hold back every later record, so the batch is written row by row and
each such row dropped with an error logged once, the rest written.
The queue holds at most SCOUT_WRITE_BEHIND_MAX_PENDING records: while the database cannot take them (an outage) it
grew without bound. Past that a record is written in the request instead, as with write-behind off (back-pressure:
while the database is down, that request fails as the database does), so none is dropped and memory is bounded.
One person holds at most SCOUT_WRITE_BEHIND_MAX_PENDING_PER_PERSON of those places (a record's ``user_id``): past it
their own records are written in the request, so the back-pressure falls on whoever fills the queue, and another
person's search is still queued instead of waiting on (or failing with) the slow database as theirs do.
SCOUT_WRITE_BEHIND_SECONDS=0 writes each record inline (the tests' default, so a test reads what a request wrote).
"""

import atexit
import logging
import threading
from collections import Counter
from collections.abc import Iterable

from django.conf import settings
from django.db import InterfaceError, OperationalError, models, transaction
from django.db.transaction import TransactionManagementError

from catalog.connections import connections_checked, connections_close, connections_held, connections_ready
from catalog.dbbusy import database_busy

logger = logging.getLogger(__name__)
MAX_BATCH = 500
# The writer thread keeps its database connection from batch to batch (catalog.connections: a new one per
# batch cost ~2 ms of CPU, and on Postgres a new server process, up to 20 times a second per worker), and
# closes it once no record has come for SCOUT_WRITE_BEHIND_KEEP_IDLE_SECONDS.
# Failures of the database, not of the rows: a lock or busy timeout, a lost connection, a flush inside a transaction
# already broken. Retried; any other failure is a row's, and that row is dropped.
TRANSIENT = (OperationalError, InterfaceError, TransactionManagementError)


class WriteBehind:
    def __init__(self) -> None:
        self._pending: list[models.Model] = []
        self._per_person: Counter = Counter()  # queued records per user_id (under ``_lock``)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._flushing = threading.Lock()  # one batch at a time, in queue order
        self._thread: threading.Thread | None = None
        self.failures = 0
        self.connected = False  # whether the writer thread holds a database connection (tests)

    def add(self, instance: models.Model) -> None:
        """Insert ``instance`` soon (or now, when write-behind is off or the queue is full: then the database's
        error, if any, is raised here). It must be complete: no pk needed."""
        if settings.SCOUT_WRITE_BEHIND_SECONDS <= 0:
            instance.save(force_insert=True)
            return
        person = getattr(instance, "user_id", None)
        with self._lock:
            full = len(self._pending) >= settings.SCOUT_WRITE_BEHIND_MAX_PENDING or (
                person is not None and self._per_person[person] >= settings.SCOUT_WRITE_BEHIND_MAX_PENDING_PER_PERSON
            )
            if not full:
                self._pending.append(instance)
                self._counted([instance], 1)
                if self._thread is None or not self._thread.is_alive():
                    self._thread = threading.Thread(target=self._run, name="scout-write-behind", daemon=True)
                    self._thread.start()
                if len(self._pending) == 1 or len(self._pending) >= MAX_BATCH:
                    self._wake.notify()
        if full:  # the database has not kept up (or is down): this caller waits for its own row, or fails with it
            instance.save(force_insert=True)

    def _counted(self, instances: list[models.Model], step: int) -> None:
        """Count ``instances`` in (1) or out (-1) of their people's places in the queue; hold ``_lock``."""
        for instance in instances:
            person = getattr(instance, "user_id", None)
            if person is not None:
                self._per_person[person] += step
                if self._per_person[person] <= 0:
                    del self._per_person[person]

    def pending(self, person: int | None = None) -> int:
        """How many records wait (of ``person``'s, by user id, when given)."""
        with self._lock:
            return len(self._pending) if person is None else self._per_person[person]

    def flush(self) -> int:
        """Insert everything queued now, in this thread. Returns how many rows were written."""
        written = 0
        with self._flushing:
            while True:
                with self._lock:
                    batch, self._pending = self._pending[:MAX_BATCH], self._pending[MAX_BATCH:]
                    self._counted(batch, -1)
                if not batch:
                    return written
                try:
                    _insert(batch)
                except Exception as exc:
                    self.failures += 1
                    if _transient(exc):
                        with self._lock:  # back at the front, in order; retried by the next flush
                            self._pending[:0] = batch
                            self._counted(batch, 1)
                        raise
                    # A row's fault: retried whole, a row that can never be written would hold back every later
                    # record of every caller for ever (and fail each flush on the request path).
                    written += self._insert_each(batch)
                    continue
                written += len(batch)

    def _insert_each(self, batch: list[models.Model]) -> int:
        """Insert ``batch`` row by row, dropping (and logging) each row that cannot be written. A ``TRANSIENT``
        failure puts the rows not yet written back at the front and raises, as a failed batch does."""
        written = 0
        for position, instance in enumerate(batch):
            try:
                _insert([instance])
            except Exception as exc:
                if _transient(exc):
                    with self._lock:
                        self._pending[:0] = batch[position:]
                        self._counted(batch[position:], 1)
                    raise
                detail = f"{type(exc).__name__}: {exc}"[:300]
                logger.error("write-behind: dropped a %s that could not be written (%s)", instance._meta.label, detail)
                continue
            written += 1
        return written

    def _run(self) -> None:
        while True:
            with self._lock:
                if not self._pending:  # idle: keep the connection a while for the next batch, then let it go
                    self._wake.wait(timeout=settings.SCOUT_WRITE_BEHIND_KEEP_IDLE_SECONDS)
                    if not self._pending:
                        connections_close()
                        self.connected = False
                while not self._pending:
                    self._wake.wait()
                if len(self._pending) < MAX_BATCH:  # let the batch fill for a moment: one commit for many
                    self._wake.wait(timeout=max(settings.SCOUT_WRITE_BEHIND_SECONDS, 0.001))
            connections_ready()
            try:
                self.flush()
            except Exception:  # noqa: BLE001 - kept queued and retried; the request path never sees it
                logger.exception("write-behind: could not write %d queued records; retrying", self.pending())
            finally:
                connections_checked()
                self.connected = connections_held()


def _transient(exc: Exception) -> bool:
    """Whether ``exc`` is the database's failure now (retry the rows), not a row's (drop it)."""
    return isinstance(exc, TRANSIENT) or database_busy(exc)


def _insert(batch: Iterable[models.Model]) -> None:
    by_model: dict[type[models.Model], list[models.Model]] = {}
    for instance in batch:
        by_model.setdefault(type(instance), []).append(instance)
    with transaction.atomic():
        for model, instances in by_model.items():
            model.objects.bulk_create(instances)


_writer = WriteBehind()


def write_behind() -> WriteBehind:
    return _writer


def write_behind_flush() -> int:
    """Write every queued record now (before reading records this process may still hold, and at exit)."""
    return _writer.flush()


@atexit.register
def _flush_at_exit() -> None:
    try:
        written = _writer.flush()
    except Exception:  # noqa: BLE001 - at exit there is nobody left to tell but the log
        logger.exception("write-behind: %d queued records could not be written at shutdown", _writer.pending())
        return
    if written:
        logger.info("write-behind: wrote %d queued records at shutdown", written)
