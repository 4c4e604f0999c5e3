"""Import ``tools/list`` dumps (JSON Lines, one tool per line) as servers with no live connection.

A file is the complete listing of every server it names: each of those servers is reconciled with
``catalog_apply_listing`` exactly as a live sync would (same normalization, hashing, revisions and
tombstones) and gets its own ``SyncRun(kind=IMPORT)``. Servers the file does not name are untouched.
"""

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import transaction

from catalog.choices import OPERATOR_STOPPED_STATUSES, ServerStatus, SyncKind, Transport
from catalog.definitions import normalize_listing
from catalog.models import Server, SyncRun, Tool, validate_namespace
from catalog.progress import ProgressCallback, progress_none
from catalog.services.apply import ApplyResult, catalog_apply_listing
from catalog.services.runs import sync_run_finish, sync_run_start
from catalog.signals import tools_changed

SLUG_MAX_LENGTH = Server._meta.get_field("slug").max_length
NAME_MAX_LENGTH = Server._meta.get_field("name").max_length
CATEGORY_MAX_LENGTH = Server._meta.get_field("category").max_length
ENVIRONMENT_MAX_LENGTH = Server._meta.get_field("environment").max_length
LOOKUP_BATCH = 500
SERVERS_PER_TRANSACTION = 200


class ImportFileError(Exception):
    """The file as a whole cannot be imported (missing, unreadable); nothing was changed."""


@dataclass(frozen=True)
class LineError:
    """A line the importer could not use; ``line`` is 1-based."""

    line: int
    message: str

    def __str__(self) -> str:
        return f"line {self.line}: {self.message}"


@dataclass(frozen=True)
class ServerMetadata:
    """Server-level facts from a ``servers-*.jsonl`` file."""

    title: str = ""
    description: str = ""
    category: str = ""


@dataclass
class _ServerLines:
    raw_tools: list[Any] = field(default_factory=list)
    line_numbers: list[int] = field(default_factory=list)
    title: str = ""
    category: str = ""


@dataclass
class ImportReport:
    """What one file's import did. ``bad_lines`` covers lines and definitions that were refused."""

    source: str
    servers: int = 0
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    rejected: int = 0
    failed_servers: int = 0
    bad_lines: list[LineError] = field(default_factory=list)
    runs: list[SyncRun] = field(default_factory=list)
    touched_pks: list[int] = field(default_factory=list)
    seconds: float = 0.0

    def add(self, result: ApplyResult) -> None:
        self.touched_pks.extend(result.touched_pks)
        self.added += result.added
        self.changed += result.changed
        self.unchanged += result.unchanged
        self.removed += result.removed


def normalize_server_slug(value: Any) -> str:
    """The slug for a file's ``server`` field. Raises ValueError when it cannot be one.

    Surrounding whitespace is stripped (some public dumps carry ``"MCPunk "``); a slug never keeps it.
    """
    if not isinstance(value, str) or not value.strip():
        raise ValueError("missing 'server'")
    slug = value.strip()
    if len(slug) > SLUG_MAX_LENGTH:
        raise ValueError(f"'server' is longer than {SLUG_MAX_LENGTH} characters")
    try:
        validate_namespace(slug)
    except ValidationError as exc:
        raise ValueError(f"'server' {slug[:80]!r} {'; '.join(exc.messages)}") from exc
    return slug


def _read_lines(path: Path) -> tuple[dict[str, _ServerLines], list[LineError]]:
    """Group a catalog file's tool lines by server slug; collect the lines no server can own."""
    groups: dict[str, _ServerLines] = {}
    errors: list[LineError] = []
    try:
        handle = path.open("rb")
    except OSError as exc:
        raise ImportFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    with handle:
        for number, raw_line in enumerate(handle, start=1):
            if not raw_line.strip():
                continue
            try:
                item = json.loads(raw_line.decode("utf-8"))
            except UnicodeDecodeError:
                errors.append(LineError(number, "not valid UTF-8"))
                continue
            except json.JSONDecodeError as exc:
                errors.append(LineError(number, f"invalid JSON: {exc.msg} at column {exc.colno}"))
                continue
            except RecursionError:  # the parser recurses per level: thousands of brackets failed the whole import
                errors.append(LineError(number, "the line is nested too deeply"))
                continue
            if not isinstance(item, dict):
                errors.append(LineError(number, f"a line must be a JSON object, got {type(item).__name__}"))
                continue
            try:
                slug = normalize_server_slug(item.get("server"))
            except ValueError as exc:
                errors.append(LineError(number, str(exc)))
                continue
            group = groups.setdefault(slug, _ServerLines())
            group.raw_tools.append(item)
            group.line_numbers.append(number)
            group.title = group.title or _short_text(item.get("server_title"), NAME_MAX_LENGTH)
            group.category = group.category or _short_text(item.get("category"), CATEGORY_MAX_LENGTH)
    return groups, errors


def _short_text(value: Any, limit: int) -> str:
    return value.strip()[:limit] if isinstance(value, str) else ""


def read_server_metadata(path: Path) -> dict[str, ServerMetadata]:
    """Read a ``servers-*.jsonl`` file (server, title, description/summary, categories), keyed by slug.

    Lines that cannot be used are skipped: server metadata is decoration, never a reason to fail an import.
    Raises ImportFileError when the file cannot be read.
    """
    metadata: dict[str, ServerMetadata] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise ImportFileError(f"cannot read {path}: {exc.strerror or exc}") from exc
    for line in text.splitlines():
        try:
            item = json.loads(line)
            slug = normalize_server_slug(item.get("server"))
        except (json.JSONDecodeError, ValueError, AttributeError):
            continue
        categories = item.get("categories")
        category = categories[0] if isinstance(categories, list) and categories else item.get("category")
        metadata[slug] = ServerMetadata(
            title=_short_text(item.get("title"), NAME_MAX_LENGTH),
            description=_short_text(item.get("description"), 100_000) or _short_text(item.get("summary"), 100_000),
            category=_short_text(category, CATEGORY_MAX_LENGTH),
        )
    return metadata


def _existing_servers(slugs: list[str]) -> dict[str, Server]:
    servers: dict[str, Server] = {}
    for start in range(0, len(slugs), LOOKUP_BATCH):
        for server in Server.objects.filter(slug__in=slugs[start : start + LOOKUP_BATCH]):
            servers[server.slug] = server
    return servers


def _servers_for(
    groups: dict[str, _ServerLines], *, environment: str | None, metadata: dict[str, ServerMetadata]
) -> dict[str, Server]:
    """Every server the file names, created as IMPORTED when missing (one bulk insert)."""
    servers = _existing_servers(list(groups))
    missing = []
    for slug, group in groups.items():
        if slug in servers:
            continue
        meta = metadata.get(slug, ServerMetadata())
        server = Server(
            slug=slug,
            name=group.title or meta.title or slug[:NAME_MAX_LENGTH],
            description=meta.description,
            category=group.category or meta.category,
            transport=Transport.IMPORTED,
        )
        if environment:
            server.environment = environment
        missing.append(server)
    Server.objects.bulk_create(missing, batch_size=LOOKUP_BATCH)
    if missing:
        servers.update(_existing_servers([server.slug for server in missing]))
    return servers


def _update_server_details(
    server: Server, group: _ServerLines, *, environment: str | None, meta: ServerMetadata | None
) -> list[str]:
    """Refresh an imported server's name, description, category and environment from the files."""
    wanted = {
        "name": group.title or (meta.title if meta else ""),
        "description": meta.description if meta else "",
        "category": group.category or (meta.category if meta else ""),
        "environment": environment or "",
    }
    changed = []
    for field_name, value in wanted.items():
        if value and getattr(server, field_name) != value:
            setattr(server, field_name, value)
            changed.append(field_name)
    return changed


def _rejections_with_lines(rejections: list[dict[str, str]], group: _ServerLines) -> list[dict[str, Any]]:
    """Attach line numbers to ``normalize_listing`` rejections (labelled by name, or ``#index``).

    Each rejection gains ``lines`` (a list of 1-based line numbers) and ``line`` (the same, as text for the
    SyncRun and the admin)."""
    lines_by_name: dict[str, list[int]] = {}
    for raw, number in zip(group.raw_tools, group.line_numbers, strict=True):
        name = raw.get("name")
        if isinstance(name, str) and name.strip():
            lines_by_name.setdefault(name[:120], []).append(number)
    located = []
    for rejection in rejections:
        label = rejection["name"]
        if label.startswith("#") and label[1:].isdigit():
            lines = [group.line_numbers[int(label[1:])]]
        else:
            # A name on several lines (duplicates) cannot be pinned to one of them: name them all.
            lines = lines_by_name.get(label, [])
        located.append({**rejection, "line": ", ".join(str(n) for n in lines), "lines": lines})
    return located


def _import_server(
    server: Server, group: _ServerLines, *, source: str, keep_all: bool, details: list[str]
) -> tuple[SyncRun, ApplyResult | None, list[dict[str, Any]]]:
    """Reconcile one server with its lines; a failure is recorded on its run and server, never raised."""
    run = sync_run_start(kind=SyncKind.IMPORT, server=server, source=source)
    definitions, rejections, mentioned = normalize_listing(
        group.raw_tools, max_bytes=settings.SCOUT_MAX_TOOL_DEFINITION_BYTES
    )
    located = _rejections_with_lines(rejections, group)
    rejections = [{key: value for key, value in r.items() if key != "lines"} for r in located]
    keep_names = set(mentioned)
    if keep_all:
        # The file has unreadable lines; one of them may be this server's tool, so tombstone nothing.
        keep_names.update(Tool.objects.filter(server=server).values_list("name", flat=True))
    try:
        result = catalog_apply_listing(
            server=server, definitions=definitions, keep_names=keep_names, run=run, notify=False
        )
    except Exception as exc:  # noqa: BLE001 - one broken server must not stop the others; the run keeps the error
        sync_run_finish(run, rejections=rejections, error=f"{type(exc).__name__}: {exc}")
        server.last_error = run.error
        server.save(update_fields=["last_error", *details, "updated_at"])
        return run, None, located
    sync_run_finish(run, result=result, rejections=rejections)
    if server.status not in OPERATOR_STOPPED_STATUSES:  # an operator's "disabled"/"archived" outlives re-imports
        server.status = ServerStatus.ACTIVE
    server.last_synced_at = run.finished_at
    server.last_error = run.error
    server.save(update_fields=["status", "last_synced_at", "last_error", *details, "updated_at"])
    return run, result, located


def _import_group(
    report: ImportReport,
    server: Server,
    group: _ServerLines,
    *,
    metadata: dict[str, ServerMetadata],
    environment: str | None,
    unreadable: bool,
    line_errors: list[LineError],
) -> None:
    if server.transport != Transport.IMPORTED:
        message = f"server {server.slug!r} is a live {server.transport} server; import only updates imported servers"
        line_errors.extend(LineError(number, message) for number in group.line_numbers)
        return
    details = _update_server_details(server, group, environment=environment, meta=metadata.get(server.slug))
    run, result, rejections = _import_server(server, group, source=report.source, keep_all=unreadable, details=details)
    report.servers += 1
    report.runs.append(run)
    report.rejected += len(rejections)
    report.bad_lines.extend(
        LineError(min(r["lines"], default=0), f"{server.slug}::{r['name']}: {r['reason']}") for r in rejections
    )
    if result is None:
        report.failed_servers += 1
    else:
        report.add(result)


def catalog_import_file(
    *,
    path: Path,
    environment: str | None = None,
    server_metadata: dict[str, ServerMetadata] | None = None,
    index: bool = True,
    progress: ProgressCallback = progress_none,
) -> ImportReport:
    """Import one catalog JSONL file; see the module docstring for the rules.

    ``index=False`` sends ``tools_changed`` with ``index=False``: derived indexes (search) skip the
    per-batch update and the operator rebuilds once afterwards (``search_rebuild``); caches still refresh.

    Bad lines (invalid JSON, no server, refused definitions) are reported with their line numbers in
    ``ImportReport.bad_lines`` and on the SyncRuns; every good line is still imported. When some line
    could not be read at all, no tool is tombstoned by this import (the lost line might have listed it).
    A server that exists with a live transport is refused: import never overwrites a synced server.
    Raises ImportFileError when the file cannot be read (nothing is changed then).
    """
    started = time.monotonic()
    source = str(path)
    report = ImportReport(source=source)
    groups, line_errors = _read_lines(path)
    metadata = server_metadata or {}
    servers = _servers_for(groups, environment=environment, metadata=metadata)
    unreadable = bool(line_errors)

    items = list(groups.items())
    total, done = sum(len(group.raw_tools) for group in groups.values()), 0
    progress(0, total)
    for start in range(0, len(items), SERVERS_PER_TRANSACTION):
        # Each server is still reconciled atomically (a savepoint in catalog_apply_listing); committing
        # servers in batches saves a disk flush per server (it dominates large imports on SQLite) and
        # sends one tools_changed per batch rather than one reindex per server.
        touched_before = len(report.touched_pks)
        with transaction.atomic():
            for slug, group in items[start : start + SERVERS_PER_TRANSACTION]:
                _import_group(
                    report,
                    servers[slug],
                    group,
                    metadata=metadata,
                    environment=environment,
                    unreadable=unreadable,
                    line_errors=line_errors,
                )
                done += len(group.raw_tools)
                progress(done, total)
            touched = report.touched_pks[touched_before:]
            if touched:
                transaction.on_commit(
                    lambda touched=touched: tools_changed.send(sender=Tool, tool_pks=touched, index=index)
                )

    if line_errors:
        # Lines no server can own still leave a trace an operator can find in the admin.
        run = sync_run_start(kind=SyncKind.IMPORT, source=source)
        sync_run_finish(
            run, rejections=[{"name": f"line {e.line}", "reason": e.message, "line": str(e.line)} for e in line_errors]
        )
        report.runs.append(run)
        report.rejected += len(line_errors)
        report.bad_lines.extend(line_errors)
    report.bad_lines.sort(key=lambda error: error.line)
    report.seconds = time.monotonic() - started
    return report


def catalog_import_files(
    *,
    paths: list[Path],
    environment: str | None = None,
    servers_path: Path | None = None,
    index: bool = True,
    progress_for: Callable[[Path], ProgressCallback] | None = None,
) -> list[ImportReport]:
    """Import several files in order, each the complete listing of the servers it names. ``progress_for(path)``
    gives the progress callback for one file (see catalog_import_file).

    Every path and the environment are checked before anything is imported. Raises ImportFileError for a
    missing file or an environment name longer than the column.
    """
    if environment is not None and not (0 < len(environment.strip()) <= ENVIRONMENT_MAX_LENGTH):
        raise ImportFileError(f"--environment must be 1 to {ENVIRONMENT_MAX_LENGTH} characters")
    environment = environment.strip() if environment else None
    for path in [*paths, *([servers_path] if servers_path else [])]:
        if not path.is_file():
            raise ImportFileError(f"no such file: {path}")
    metadata = read_server_metadata(servers_path) if servers_path else {}
    return [
        catalog_import_file(
            path=path,
            environment=environment,
            server_metadata=metadata,
            index=index,
            progress=progress_for(path) if progress_for else progress_none,
        )
        for path in paths
    ]
