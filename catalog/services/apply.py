"""Reconcile a server's tools with a complete, validated listing. Shared by live sync and file import."""

from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from catalog.constants import make_tool_id
from catalog.definitions import ToolDefinition
from catalog.fields import json_text
from catalog.models import Server, SyncRun, Tool, ToolRevision
from catalog.signals import DefinitionChange, catalog_rows_changed, tool_definitions_changed, tools_changed

UPSTREAM_FIELDS = [
    "upstream_title",
    "description",
    "input_schema",
    "output_schema",
    "annotations",
    "definition_hash",
    "upstream_deprecated",
]

# What an unchanged definition may still move: its deprecated flag, the order of its schemas' and annotations' keys.
RESTATED_FIELDS = ["upstream_deprecated", "input_schema", "output_schema", "annotations", "last_seen_at"]


@dataclass
class ApplyResult:
    added: int = 0
    changed: int = 0
    unchanged: int = 0
    removed: int = 0
    touched_pks: list[int] = field(default_factory=list)


def _set_upstream_fields(tool: Tool, definition: ToolDefinition, digest: str) -> None:
    tool.upstream_title = definition.title
    tool.description = definition.description
    tool.input_schema = definition.input_schema
    tool.output_schema = definition.output_schema
    tool.annotations = definition.annotations
    tool.definition_hash = digest
    tool.upstream_deprecated = definition.deprecated


def catalog_apply_listing(
    *,
    server: Server,
    definitions: list[ToolDefinition],
    keep_names: set[str],
    run: SyncRun | None = None,
    notify: bool = True,
) -> ApplyResult:
    """Make ``server``'s tools match ``definitions``, in one transaction.

    ``definitions`` must be the server's complete, validated listing. Tools absent from it and from
    ``keep_names`` (names the listing mentioned but that were rejected) are tombstoned, never deleted.
    Each new or changed definition gets a ToolRevision; one ``tool_definitions_changed`` carries them all,
    inside the transaction; ``tools_changed`` follows on commit. Curation fields are never written.
    Applying the same listing twice changes nothing the second time.

    ``notify=False`` leaves ``tools_changed`` to the caller, which sends it for ``result.touched_pks``:
    a bulk import coalesces many servers into one signal instead of one reindex per server.
    """
    now = timezone.now()
    result = ApplyResult()
    changed_pairs: list[tuple[Tool, str | None]] = []
    with transaction.atomic():
        existing = {tool.name: tool for tool in Tool.objects.select_for_update().filter(server=server)}
        to_create: list[Tool] = []
        to_update: list[Tool] = []
        seen_unchanged: list[int] = []
        restated: list[Tool] = []
        digests: dict[str, str] = {}
        for definition in definitions:
            digest = definition.hash
            digests[definition.name] = digest
            tool = existing.get(definition.name)
            if tool is None:
                tool = Tool(
                    server=server,
                    name=definition.name,
                    tool_id=make_tool_id(server.slug, definition.name),
                    first_seen_at=now,
                    last_seen_at=now,
                )
                _set_upstream_fields(tool, definition, digest)
                to_create.append(tool)
                result.added += 1
                changed_pairs.append((tool, None))
            elif tool.definition_hash != digest or tool.removed_at is not None:
                previous = tool.definition_hash
                if tool.removed_at is not None:
                    result.added += 1  # a tombstoned tool came back
                else:
                    result.changed += 1
                _set_upstream_fields(tool, definition, digest)
                tool.removed_at = None
                tool.last_seen_at = now
                to_update.append(tool)
                changed_pairs.append((tool, previous))
            elif tool.upstream_deprecated != definition.deprecated or _keys_reordered(tool, definition):
                # Only the deprecated flag or the order of keys moved: not a new definition (no revision, no review),
                # so the run counts it unchanged, as its page (which lists the revisions it wrote) shows it; search
                # re-reads it all the same. A Postgres row from before catalog 0010 gets its upstream's order here.
                tool.upstream_deprecated = definition.deprecated
                tool.input_schema = definition.input_schema
                tool.output_schema = definition.output_schema
                tool.annotations = definition.annotations
                tool.last_seen_at = now
                restated.append(tool)
                result.unchanged += 1
            else:
                result.unchanged += 1
                seen_unchanged.append(tool.pk)

        Tool.objects.bulk_create(to_create, batch_size=1000)
        Tool.objects.bulk_update(to_update, [*UPSTREAM_FIELDS, "removed_at", "last_seen_at"], batch_size=1000)
        Tool.objects.bulk_update(restated, RESTATED_FIELDS, batch_size=1000)
        _restate_revisions(restated)
        if seen_unchanged:
            Tool.objects.filter(pk__in=seen_unchanged).update(last_seen_at=now)

        gone = [
            tool
            for name, tool in existing.items()
            if name not in digests and name not in keep_names and tool.removed_at is None
        ]
        if gone:
            Tool.objects.filter(pk__in=[tool.pk for tool in gone]).update(removed_at=now)
            result.removed = len(gone)

        if to_create and to_create[0].pk is None:  # backends without RETURNING on bulk insert
            created = Tool.objects.filter(server=server, name__in=[t.name for t in to_create])
            pks = dict(created.values_list("name", "pk"))
            for tool in to_create:
                tool.pk = pks[tool.name]

        revisions = _record_revisions(changed_pairs, now=now, run=run)
        if changed_pairs:
            # One signal for the listing: governance reviews the batch with a bounded number of queries.
            changes = [
                DefinitionChange(tool, revision, previous)
                for (tool, previous), revision in zip(changed_pairs, revisions, strict=True)
            ]
            tool_definitions_changed.send(sender=Tool, changes=changes)

        result.touched_pks = [tool.pk for tool, _ in changed_pairs] + [tool.pk for tool in restated + gone]
        if result.touched_pks:
            catalog_rows_changed.send(sender=Tool)
        if result.touched_pks and notify:
            touched = list(result.touched_pks)
            transaction.on_commit(lambda: tools_changed.send(sender=Tool, tool_pks=touched))
    return result


def _keys_reordered(tool: Tool, definition: ToolDefinition) -> bool:
    """Whether the stored definition, the same by hash (which sorts keys), lists some object's keys in another order
    than ``definition``: the upstream reordered them, or a Postgres row from before catalog 0010 lost its order."""
    return json_text(tool.upstream_definition()) != json_text(definition.canonical())


def _restate_revisions(tools: list[Tool]) -> None:
    """The revision of each tool's current definition, in the order the tool now has (the REST API's revisions)."""
    if not tools:
        return
    by_pk = {tool.pk: tool for tool in tools}
    hashes = {tool.definition_hash for tool in tools}
    stale = []
    for revision in ToolRevision.objects.filter(tool__in=list(by_pk), definition_hash__in=hashes):
        tool = by_pk[revision.tool_id]
        definition = tool.upstream_definition()
        if revision.definition_hash != tool.definition_hash:
            continue
        if json_text(revision.definition) != json_text(definition):
            revision.definition = definition
            stale.append(revision)
    ToolRevision.objects.bulk_update(stale, ["definition"], batch_size=1000)


def _record_revisions(changed_pairs: list[tuple[Tool, str | None]], *, now, run: SyncRun | None) -> list[ToolRevision]:
    """One revision per distinct definition; a tool that returns to an earlier definition reuses it."""
    if not changed_pairs:
        return []
    known = {
        (rev.tool_id, rev.definition_hash): rev
        for rev in ToolRevision.objects.filter(tool__in=[tool.pk for tool, _ in changed_pairs])
    }
    new_revisions = []
    for tool, _ in changed_pairs:
        if (tool.pk, tool.definition_hash) not in known:
            revision = ToolRevision(
                tool=tool,
                definition_hash=tool.definition_hash,
                definition=tool.upstream_definition(),
                created_at=now,
                sync_run=run,
            )
            known[(tool.pk, tool.definition_hash)] = revision
            new_revisions.append(revision)
    ToolRevision.objects.bulk_create(new_revisions, batch_size=1000)
    return [known[(tool.pk, tool.definition_hash)] for tool, _ in changed_pairs]
