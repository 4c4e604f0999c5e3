"""Live sync of one upstream server's tools into the catalog."""

import logging
from collections.abc import Iterable

from django.conf import settings
from django.db import DatabaseError, transaction
from django.utils import timezone

from catalog import openapi, upstream
from catalog.advice import sync_failed_next, then_sync_again
from catalog.choices import OPERATOR_STOPPED_STATUSES, ServerStatus, SyncKind, SyncStatus, Transport
from catalog.definitions import ToolDefinition, normalize_listing
from catalog.locks import named_lock
from catalog.metrics import SYNC_SECONDS, SYNCS
from catalog.models import Server, SyncRun
from catalog.secrets import secrets_removed, server_secrets
from catalog.services.apply import catalog_apply_listing
from catalog.services.runs import MAX_ERROR_CHARS, storable, sync_run_finish, sync_run_skip, sync_run_start
from catalog.signals import catalog_rows_changed

logger = logging.getLogger(__name__)

DIED = "interrupted: the process running this sync stopped"
# Of an internal error's message, what a failed run keeps (its first line): the reason, not a dump.
ERROR_MESSAGE_CHARS = 300


def server_sync_lock_ttl() -> int:
    """How long a sync's lock lives unless renewed: a sync renews it while it runs (``named_lock``), so it runs out
    this long after the sync's process died, and its run is then closed as failed (``sync_runs_dead_close``)."""
    return max(3, settings.SCOUT_SYNC_LOCK_SECONDS)


def server_sync_lock_name(server_pk: int) -> str:
    return f"catalog-sync:{server_pk}"


def server_list_syncable() -> list[int]:
    """Primary keys of servers a reconcile syncs: live transports, not disabled or archived."""
    return list(
        Server.objects.exclude(status__in=OPERATOR_STOPPED_STATUSES)
        .exclude(transport=Transport.IMPORTED)
        .order_by("pk")
        .values_list("pk", flat=True)
    )


def server_sync(
    *, server_pk: int, trigger: str = "manual", started_by_id: int | None = None, run_pk: int | None = None
) -> SyncRun:
    """Fetch ``server_pk``'s complete tools/list and reconcile the catalog with it. Returns the SyncRun, recorded as
    started by the user ``started_by_id`` when a person asked for it (their home's recent actions list it): the run
    ``run_pk`` recorded queued when it was asked for (``sync_run_queue``), if it still is, else a new one.

    Never two runs for one server at once: a run that finds the lock taken is recorded SKIPPED, as is a
    disabled or imported server. The whole listing is fetched before anything is written, so a failure
    part-way (page 2, a timeout) changes no tool; it records a FAILED run and marks the server DEGRADED
    (it had worked, failing now) or UNAVAILABLE (failing again, or never worked). Tools that fail
    validation are rejected one by one (PARTIAL run) and the good ones kept.

    Raises Server.DoesNotExist for an unknown pk, and for a server deleted while it synced (its run went with
    it). Unexpected errors (database) are recorded on the run and re-raised.
    """
    server = Server.objects.get(pk=server_pk)
    asked = {"started_by_id": started_by_id, "queued_pk": run_pk}
    if server.status in OPERATOR_STOPPED_STATUSES:
        reason = f"server is {server.status}"
        return _counted(sync_run_skip(server=server, source=trigger, reason=reason, **asked))
    if server.transport == Transport.IMPORTED:
        reason = "imported server: no live connection to sync"
        return _counted(sync_run_skip(server=server, source=trigger, reason=reason, **asked))
    run: SyncRun | None = None
    try:
        with named_lock(server_sync_lock_name(server.pk), ttl=server_sync_lock_ttl(), renewed=True) as acquired:
            if not acquired:
                reason = "another sync of this server is running"
                return _counted(sync_run_skip(server=server, source=trigger, reason=reason, **asked))
            _runs_dead_close(server.pk)
            run = sync_run_start(kind=SyncKind.SYNC, server=server, source=trigger, **asked)
            with SYNC_SECONDS.time():
                return _counted(_sync_locked(server, run))
    except Exception as exc:
        # Deleted meanwhile, the server took its run along: writing its tools or closing the run then fails
        # (IntegrityError, an update of no row). A sync of no server, not an error.
        if isinstance(exc, DatabaseError) and not Server.objects.filter(pk=server.pk).exists():
            raise Server.DoesNotExist(f"server {server.pk} was deleted while it synced") from None
        if run is None:
            _failed_to_start(server, trigger, error=exc, **asked)
        raise


def _counted(run: SyncRun) -> SyncRun:
    SYNCS.labels(status=run.status).inc()
    return run


def sync_runs_dead_close(server_pks: Iterable[int] | None = None) -> int:
    """Close the sync runs still "running" whose process died (a worker killed mid-sync), of these servers or of all,
    as failed, so the admin and the API stop showing them as under way; returns how many. A sync holds its server's
    lock, renewed, until its run is closed: a lock this can take means no sync of that server is under way.

    Called by the beat every lock TTL (``catalog.tasks.close_dead_sync_runs``), by a serving process that runs syncs
    in-process as it starts, and by the next sync of the server; never by a page or an API read, which only read."""
    if server_pks is None:
        running = SyncRun.objects.filter(kind=SyncKind.SYNC, status=SyncStatus.RUNNING, server__isnull=False)
        server_pks = running.order_by().values_list("server_id", flat=True).distinct()
    closed = 0
    for pk in sorted(set(server_pks)):
        with named_lock(server_sync_lock_name(pk), ttl=server_sync_lock_ttl()) as free:
            if free and (count := _runs_dead_close(pk)):
                closed += count
                _server_mark_interrupted(pk)
    return closed


def _runs_dead_close(server_pk: int) -> int:
    """The lock held: a run of the server still "running" died with its process."""
    return SyncRun.objects.filter(server_id=server_pk, kind=SyncKind.SYNC, status=SyncStatus.RUNNING).update(
        status=SyncStatus.FAILED, error=DIED, finished_at=timezone.now()
    )


def _server_mark_interrupted(server_pk: int) -> None:
    """The server's last sync died with its process (opsux12): marked as after Scout's own failure
    (``_server_mark_scouts_failure``), unless a later run (which closed this one, under the lock) says how it is."""
    latest = SyncRun.objects.filter(server_id=server_pk).order_by("-started_at", "-id").values("status", "error")
    if latest.first() == {"status": SyncStatus.FAILED, "error": DIED}:
        _server_mark_scouts_failure(server_pk, error=DIED)


def _server_mark_scouts_failure(server_pk: int, *, error: str) -> None:
    """The server's last sync failed for Scout's reason, not the upstream's (its process died, an internal error):
    its page says so (``last_error``) rather than only the run's, and a server never synced before reads as a failed
    first sync does (Unavailable), not "Never synced" (opsux12, mend1). A server that had synced keeps its status:
    its tools stay with its callers until the next sync says otherwise."""
    error = storable(error)[:MAX_ERROR_CHARS]
    with transaction.atomic():
        current = Server.objects.select_for_update().filter(pk=server_pk).values("status", "last_synced_at").first()
        if current is None or current["status"] in OPERATOR_STOPPED_STATUSES:
            return
        server = Server.objects.filter(pk=server_pk)
        if current["status"] == ServerStatus.ACTIVE and current["last_synced_at"] is None:
            server.update(status=ServerStatus.UNAVAILABLE, last_error=error)
            catalog_rows_changed.send(sender=Server)
        else:
            server.update(last_error=error)


def _failed_to_start(
    server: Server, trigger: str, *, error: BaseException, started_by_id: int | None, queued_pk: int | None
) -> None:
    """Scout failed before the sync had its run (its lock, the database): a failed run with the reason all the same
    (the queued one when it was asked for, else a new one), as for a failure later on, not only the worker's log
    (mend3). When that fails too (the database is down), the log is all there is."""
    try:
        run = sync_run_start(
            kind=SyncKind.SYNC, server=server, source=trigger, started_by_id=started_by_id, queued_pk=queued_pk
        )
        _failed_inside(server, run, _run_error(server, "starting", error))
    except Exception:
        logger.warning("sync of %s: its failure could not be recorded on a run", server.slug, exc_info=True)


def _sync_locked(server: Server, run: SyncRun) -> SyncRun:
    refused: list[dict[str, str]] = []
    refused_names: set[str] = set()
    try:
        if server.transport == Transport.OPENAPI:
            # The document is validated whole first: a malformed one fails the run and changes no tool.
            listing = openapi.openapi_list_tools(server)
            raw_tools, refused, refused_names = listing.tools, listing.rejections, listing.names
        else:
            raw_tools = upstream.list_tools(server)
    except upstream.UpstreamError as exc:
        sync_run_finish(run, error=str(exc))
        _server_mark_failed(server, error=str(exc))
        # Said where an operator reads logs too, with what to do (the admin's advice, fixed text), not only the error.
        next_step = sync_failed_next(str(exc), then=then_sync_again(server.slug))
        logger.warning("sync of %s failed: %s. What to do: %s", server.slug, exc, next_step)
        return run
    except BaseException as exc:  # an interrupt (Ctrl-C) too: a run never stays "running"
        _failed_inside(server, run, _run_error(server, "listing tools", exc))
        raise
    doing = "saving the listing"
    try:
        definitions, rejections, mentioned = normalize_listing(
            raw_tools, max_bytes=settings.SCOUT_MAX_TOOL_DEFINITION_BYTES
        )
        # Operations refused for what Scout cannot call are kept like rejected tools: not tombstoned.
        rejections, mentioned = [*refused, *rejections], mentioned | refused_names
        # Listed: the admin now shows "applying N tools" rather than "listing".
        run.progress_total = len(definitions)
        run.save(update_fields=["progress_total"])
        # Names listed but rejected are kept, not tombstoned: a bad new version must not lose the tool.
        result = catalog_apply_listing(server=server, definitions=definitions, keep_names=mentioned, run=run)
        # Its end too: a failure recording the outcome left the run "running" (closed later as a dead worker's) or
        # "success" with the server not marked, the reason only in the worker's log (mend3).
        doing = "recording the outcome"
        with transaction.atomic():  # both or neither: the run never reads "success" for a moment, then failed
            sync_run_finish(run, result=result, rejections=rejections)
            _server_mark_synced(server, warning=run.error)
    except BaseException as exc:
        _failed_inside(server, run, _run_error(server, doing, exc))
        raise
    return run


def _failed_inside(server: Server, run: SyncRun, error: str) -> None:
    """A sync that Scout itself failed (an internal error, an interrupt): the run failed with ``error`` and the server
    marked so, or a never-synced server read "Never synced" with nothing to say why (mend1)."""
    sync_run_finish(run, error=error)
    _server_mark_scouts_failure(server.pk, error=run.error)


def _run_error(server: Server, doing: str, exc: BaseException) -> str:
    """What a run Scout itself failed says, shown on its page, the server's and the API: the exception's type and the
    first line of its message, without a value the server is given from the environment or its URL's path (a
    database's message goes on with its context and the rows' values; the traceback is the log's)."""
    if not isinstance(exc, Exception):
        return f"interrupted while {doing} ({type(exc).__name__})"  # KeyboardInterrupt, SystemExit
    message = next((line.strip() for line in str(exc).splitlines() if line.strip()), "")
    if server.url:
        message = message.replace(server.url, upstream.safe_url(server.url))
    message = secrets_removed(message, server_secrets(server))[:ERROR_MESSAGE_CHARS]
    return f"internal error while {doing}: {type(exc).__name__}" + (f": {message}" if message else "")


def _server_mark_synced(server: Server, *, warning: str) -> None:
    # update() rather than save(): never overwrite fields an operator edited while the sync ran, and
    # never re-activate a server disabled or archived meanwhile.
    with transaction.atomic():
        live = Server.objects.filter(pk=server.pk).exclude(status__in=OPERATOR_STOPPED_STATUSES)
        reactivated = live.exclude(status=ServerStatus.ACTIVE).update(status=ServerStatus.ACTIVE)
        live.update(last_synced_at=timezone.now(), last_error=storable(warning)[:MAX_ERROR_CHARS])
        if reactivated:
            catalog_rows_changed.send(sender=Server)


def _server_mark_failed(server: Server, *, error: str) -> None:
    """ACTIVE with a past success -> DEGRADED (first failure); otherwise -> UNAVAILABLE."""
    with transaction.atomic():
        current = Server.objects.select_for_update().filter(pk=server.pk).values("status", "last_synced_at").first()
        if current is None or current["status"] in OPERATOR_STOPPED_STATUSES:
            return
        had_worked = current["status"] == ServerStatus.ACTIVE and current["last_synced_at"] is not None
        status = ServerStatus.DEGRADED if had_worked else ServerStatus.UNAVAILABLE
        Server.objects.filter(pk=server.pk).update(status=status, last_error=storable(error)[:MAX_ERROR_CHARS])
        catalog_rows_changed.send(sender=Server)


def server_openapi_preview(
    *, server: Server, document: str | None = None
) -> tuple[list[ToolDefinition], list[dict[str, str]]]:
    """The tools a sync of OpenAPI ``server`` would import now, and the operations it would refuse; saves nothing.
    ``document``: the document's text to read instead of the stored one or its URL (an unsaved form's; "" for none).

    Raises UpstreamError when the document cannot be fetched, parsed or validated (what a sync would record
    as a FAILED run), or when ``server`` is not an OpenAPI server.
    """
    if server.transport != Transport.OPENAPI:
        raise upstream.UpstreamError(f"{server.slug}: not an OpenAPI server", kind="config")
    listing = openapi.openapi_list_tools(server, text=document)
    definitions, rejections, _ = normalize_listing(listing.tools, max_bytes=settings.SCOUT_MAX_TOOL_DEFINITION_BYTES)
    return definitions, [*listing.rejections, *rejections]
