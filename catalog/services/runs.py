"""SyncRun bookkeeping shared by sync and import."""

from datetime import datetime

from django.utils import timezone

from catalog.choices import SyncKind, SyncStatus
from catalog.models import Server, SyncRun
from catalog.services.apply import ApplyResult

MAX_ERROR_CHARS = 4000


def storable(text: str) -> str:
    """``text`` as the database can keep it: Postgres refuses a NUL in text, and an upstream's error message or tool
    name may hold one (the run's record then failed, leaving it "running" and the server's failure unrecorded)."""
    return text.replace("\x00", "\ufffd")


def sync_run_queue(*, server: Server, source: str, started_by_id: int | None = None) -> SyncRun:
    """Record a sync asked for and queued for a worker, so the caller has its run at once: QUEUED until the worker
    starts it (``sync_run_start`` / ``sync_run_skip`` with its pk), which then carries on with this same run."""
    return SyncRun.objects.create(
        kind=SyncKind.SYNC,
        server=server,
        source=source[:500],
        status=SyncStatus.QUEUED,
        started_at=timezone.now(),
        started_by_id=started_by_id,
    )


def sync_run_queued_note(run: SyncRun, note: str) -> None:
    """Say on a run still queued why no worker has it yet (the broker refused it; the outbox keeps it)."""
    SyncRun.objects.filter(pk=run.pk, status=SyncStatus.QUEUED).update(error=storable(note)[:MAX_ERROR_CHARS])


def sync_runs_unclaimed_close(*, queued_before: datetime, held: set[int], error: str) -> int:
    """Close as failed, with ``error``, the runs still queued since before ``queued_before`` that no worker took (its
    task lost by the broker), except those in ``held`` (their task is still kept, waiting for the broker). A worker
    that takes one meanwhile wins (one conditional UPDATE each way, ``_queued_take``). Returns how many."""
    unclaimed = SyncRun.objects.filter(status=SyncStatus.QUEUED, started_at__lt=queued_before).exclude(pk__in=held)
    return unclaimed.update(
        status=SyncStatus.FAILED, error=storable(error)[:MAX_ERROR_CHARS], finished_at=timezone.now()
    )


def _queued_take(queued_pk: int | None, server: Server, **fields: object) -> SyncRun | None:
    """The queued run ``queued_pk`` of ``server``, updated with ``fields``, if it was still queued: taken once (a task
    delivered twice, or run after the run was closed, finds it taken and records a run of its own)."""
    if queued_pk is None:
        return None
    if not SyncRun.objects.filter(pk=queued_pk, server=server, status=SyncStatus.QUEUED).update(**fields):
        return None
    return SyncRun.objects.get(pk=queued_pk)


def sync_run_start(
    *,
    kind: SyncKind,
    server: Server | None = None,
    source: str = "",
    started_by_id: int | None = None,
    queued_pk: int | None = None,
) -> SyncRun:
    """A run under way: the queued run ``queued_pk`` (``sync_run_queue``) now running, else a new one."""
    now = timezone.now()
    running = {"status": SyncStatus.RUNNING, "started_at": now, "error": ""}  # a note while it waited: gone
    if server is not None and (run := _queued_take(queued_pk, server, **running)):
        return run
    return SyncRun.objects.create(
        kind=kind,
        server=server,
        source=source[:500],
        status=SyncStatus.RUNNING,
        started_at=now,
        started_by_id=started_by_id,
    )


def sync_run_finish(
    run: SyncRun,
    *,
    result: ApplyResult | None = None,
    rejections: list[dict[str, str]] | None = None,
    error: str = "",
) -> SyncRun:
    """Close a run: FAILED with ``error``, PARTIAL when tools were rejected, else SUCCESS."""
    rejections = rejections or []
    if result is not None:
        run.added, run.changed, run.unchanged, run.removed = (
            result.added,
            result.changed,
            result.unchanged,
            result.removed,
        )
        if run.kind == SyncKind.IMPORT:  # no listing step: what it applied is its total
            run.progress_total = result.added + result.changed + result.unchanged
        run.progress_done = run.progress_total
    run.rejected = len(rejections)
    rejections = [
        {key: storable(value) if isinstance(value, str) else value for key, value in item.items()}
        for item in rejections
    ]
    run.rejections = rejections[:500]
    if error:
        run.status = SyncStatus.FAILED
        run.error = storable(error)[:MAX_ERROR_CHARS]
    elif rejections:
        run.status = SyncStatus.PARTIAL
        shown = "; ".join(f"{r['name']}: {r['reason']}" for r in rejections[:5])
        more = f" (and {len(rejections) - 5} more)" if len(rejections) > 5 else ""
        run.error = f"{len(rejections)} tool(s) rejected: {shown}{more}"[:MAX_ERROR_CHARS]
    else:
        run.status = SyncStatus.SUCCESS
    run.finished_at = timezone.now()
    run.save()
    return run


def sync_run_skip(
    *, server: Server, source: str, reason: str, started_by_id: int | None = None, queued_pk: int | None = None
) -> SyncRun:
    """Record a sync that did not run (the server is disabled, or another run holds its lock): the queued run
    ``queued_pk`` closed so, else a new one."""
    now = timezone.now()
    skipped = {"status": SyncStatus.SKIPPED, "started_at": now, "finished_at": now, "error": reason[:MAX_ERROR_CHARS]}
    if run := _queued_take(queued_pk, server, **skipped):
        return run
    return SyncRun.objects.create(
        kind=SyncKind.SYNC,
        server=server,
        source=source[:500],
        started_by_id=started_by_id,
        status=SyncStatus.SKIPPED,
        started_at=now,
        finished_at=now,
        error=reason[:MAX_ERROR_CHARS],
    )
