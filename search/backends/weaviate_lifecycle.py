"""The Weaviate index lifecycle, the writing side of ``WeaviateBackend`` (search/backends/weaviate.py).

A full build (one at a time: a named lock) writes ``<prefix>_<generation>`` aside, checks its object count,
points the alias ``<prefix>`` at it, replays incremental updates published during the build, and drops older
collections after SCOUT_WEAVIATE_DROP_GRACE_SECONDS, longer than any query. Incremental publishes upsert and
delete objects through the alias. ``reconcile`` compares Weaviate with the database and repairs drift (a
partial batch failure, a lost update): the Celery task ``search.tasks.reconcile_weaviate`` (beat) and
``manage.py search_reconcile``.
"""

import logging
import time
from collections.abc import Collection, Sequence

from django.conf import settings

from ..events import search_event_record
from .base import IndexedTool
from .weaviate_layout import (
    EVENT_INDEX_DRIFT,
    NEGATIVES_VECTOR,
    TOOL_VECTOR,
    WeaviateUnavailable,
    collection_name,
    collection_properties,
    is_generation_collection,
    tool_fingerprint,
    tool_properties,
    tool_uuid,
    tool_vectors,
    visibility_filter,
)

logger = logging.getLogger(__name__)


class WeaviateLifecycle:
    """Publish, build, swap, replay, drop and reconcile, mixed into ``WeaviateBackend``, which provides the
    connection (``connect``, ``refresh_target``, ``local_refresh``, ``_read_target``, ``_count``,
    ``_failed``) and its state (``prefix``, ``_status``, ``_target``)."""

    def publish(self, *, generation: str, tools: Sequence[IndexedTool], removed: Collection[int], full: bool) -> None:
        """Full: build ``<prefix>_<generation>`` aside and swap the alias (``build``). Incremental: upsert
        ``tools`` and delete ``removed`` through the alias (a full build first when there is none yet).
        The BM25 snapshot is refreshed first, so searches have it whatever Weaviate does. Raises
        WeaviateUnavailable; the database stays the source of truth (``reconcile`` repairs drift)."""
        self.local_refresh(generation)
        client = self.connect()
        try:
            if full:
                self.build(client, generation, tools)
            else:
                changed = sorted({t.doc.pk for t in tools} | {int(pk) for pk in removed})
                replay_record(self.prefix, generation, changed)  # a build running now replays these
                if client.alias.get(alias_name=self.prefix) is None:
                    self.build(client, generation, _indexed_tools(None))
                else:
                    self._apply(client.collections.use(self.prefix), tools, removed)
        except WeaviateUnavailable:
            raise
        except Exception as exc:
            self._failed(exc)
            raise WeaviateUnavailable(f"publishing generation {generation} to Weaviate failed: {exc}") from exc
        finally:
            self._status = None
        self.refresh_target()

    def build(self, client, generation: str, tools: Sequence[IndexedTool]) -> str:
        """One full build at a time (a named lock, waited for): write aside, count, swap, replay, drop."""
        from catalog.locks import named_lock

        waited_until = time.monotonic() + settings.SCOUT_WEAVIATE_BUILD_WAIT_SECONDS
        while True:
            with named_lock(f"weaviate-build:{self.prefix}", ttl=settings.SCOUT_WEAVIATE_BUILD_LOCK_SECONDS) as held:
                if held:
                    return self._build_locked(client, generation, tools)
            if time.monotonic() > waited_until:
                waited = settings.SCOUT_WEAVIATE_BUILD_WAIT_SECONDS
                raise WeaviateUnavailable(f"another Weaviate build kept the lock for over {waited}s")
            time.sleep(0.05)

    def _build_locked(self, client, generation: str, tools: Sequence[IndexedTool]) -> str:
        from weaviate.classes.config import Configure, VectorDistances

        name = collection_name(self.prefix, generation)
        live = client.alias.get(alias_name=self.prefix)
        if live is not None and live.collection == name:
            return name  # this generation is live already (a retried publish)
        if client.collections.exists(name):  # a retried build: start again from nothing
            client.collections.delete(name)

        def vector_index():
            # flat_search_cutoff: a filtered search over fewer objects than this is an exact scan. Every
            # search is filtered by the caller's visible tools, so dense heads are exact up to this size.
            return Configure.VectorIndex.hnsw(
                distance_metric=VectorDistances.DOT, flat_search_cutoff=settings.SCOUT_WEAVIATE_FLAT_SEARCH_CUTOFF
            )

        collection = client.collections.create(
            name,
            description=f"Scout tool index, generation {generation}",
            properties=collection_properties(),
            vector_config=[
                Configure.MultiVectors.self_provided(name=TOOL_VECTOR, vector_index_config=vector_index()),
                Configure.MultiVectors.self_provided(name=NEGATIVES_VECTOR, vector_index_config=vector_index()),
            ],
        )
        try:
            self._import(collection, tools)
            stored = self._count(client, name, time.monotonic() + settings.SCOUT_WEAVIATE_INSERT_TIMEOUT)
            if stored != len(tools):
                raise WeaviateUnavailable(f"collection {name} holds {stored} objects, {len(tools)} were written")
        except Exception:
            client.collections.delete(name)  # never swap to (or leave) a half-built generation
            raise
        # The swap: queries through the alias move to the complete new collection in one step.
        if live is None:
            client.alias.create(alias_name=self.prefix, target_collection=name)
        else:
            client.alias.update(alias_name=self.prefix, new_target_collection=name)
        self._replay(client, name, generation)
        # A query resolves the alias when it starts and ends within its deadline: after the grace period
        # no query of any process uses the old collections.
        time.sleep(settings.SCOUT_WEAVIATE_DROP_GRACE_SECONDS)
        self._drop_old(client, keep=name)
        return name

    def _replay(self, client, name: str, generation: str) -> None:
        """Apply the incremental updates published while this build ran (from the database, as they are now)."""
        pks = replay_since(self.prefix, generation)
        if not pks:
            return
        tools = _indexed_tools(pks)
        present = {t.doc.pk for t in tools}
        self._apply(client.collections.use(name), tools, [pk for pk in pks if pk not in present])
        logger.info("weaviate: replayed %d tools updated during the build of %s", len(pks), name)

    def _drop_old(self, client, *, keep: str) -> None:
        """Drop generations the alias left behind, newest SCOUT_WEAVIATE_KEEP_PREVIOUS kept for rollback."""
        target = client.alias.get(alias_name=self.prefix)
        if target is None or target.collection != keep:
            return  # someone else moved the alias meanwhile: leave everything for their build to clean
        old = [
            name
            for name in client.collections.list_all(simple=True)
            if is_generation_collection(self.prefix, name) and name != keep
        ]
        old.sort(key=lambda name: _generation_order(self.prefix, name), reverse=True)
        for name in old[settings.SCOUT_WEAVIATE_KEEP_PREVIOUS :]:
            client.collections.delete(name)

    def _apply(self, collection, tools: Sequence[IndexedTool], removed: Collection[int]) -> None:
        if removed:
            collection.data.delete_many(where=visibility_filter(removed))
        self._import(collection, tools)

    @staticmethod
    def _import(collection, tools: Sequence[IndexedTool]) -> None:
        from weaviate.classes.data import DataObject

        from ..encoder import model_key

        model = model_key()
        batch_size = settings.SCOUT_WEAVIATE_BATCH_SIZE
        for start in range(0, len(tools), batch_size):
            objects = []
            for tool in tools[start : start + batch_size]:
                kinds = tool.vectors.kinds if tool.vectors is not None else ()
                texts = tool.vectors.texts if tool.vectors is not None else ()
                properties = tool_properties(tool.doc, kinds, texts)
                properties.update(model_key=model, fingerprint=tool_fingerprint(tool, model))
                uuid = tool_uuid(tool.doc.pk)
                objects.append(DataObject(properties=properties, uuid=uuid, vector=tool_vectors(tool)))
            result = collection.data.insert_many(objects)
            if result.has_errors:
                first = next(iter(result.errors.values()))
                search_event_record(
                    kind=EVENT_INDEX_DRIFT, detail=f"weaviate: {len(result.errors)} of {len(objects)} objects failed"
                )
                raise WeaviateUnavailable(f"{len(result.errors)} of {len(objects)} objects failed: {first.message}")

    def reconcile(self) -> dict[str, int]:
        """Compare the aliased collection with the database and repair it: missing or stale objects are
        written, objects of tools no longer indexed are deleted; no collection (or one of another model)
        is rebuilt. Returns counts of what it did."""
        from ..encoder import model_key
        from ..selectors import current_generation_token

        client = self.connect()
        generation = current_generation_token()
        if generation is None:
            return {"rebuilt": 0, "written": 0, "deleted": 0}
        tools = _indexed_tools(None)
        target = self._read_target(client, time.monotonic() + settings.SCOUT_WEAVIATE_TIMEOUT * 4)
        model = model_key()
        if target.collection is None or (target.model is not None and target.model != model):
            self.build(client, generation, tools)
            self.refresh_target()
            return {"rebuilt": 1, "written": len(tools), "deleted": 0}
        collection = client.collections.use(self.prefix)
        stored: dict[int, str] = {}
        for obj in collection.iterator(return_properties=["tool_pk", "fingerprint"]):
            stored[int(obj.properties["tool_pk"])] = str(obj.properties.get("fingerprint") or "")
        wanted = {t.doc.pk: t for t in tools}
        stale = [t for pk, t in wanted.items() if stored.get(pk) != tool_fingerprint(t, model)]
        extra = sorted(set(stored) - set(wanted))
        if stale or extra:
            search_event_record(
                kind=EVENT_INDEX_DRIFT, detail=f"weaviate: {len(stale)} stale or missing, {len(extra)} extra objects"
            )
            self._apply(collection, stale, extra)
        self._status = None
        return {"rebuilt": 0, "written": len(stale), "deleted": len(extra)}

    def drop_all(self) -> None:
        """Delete the alias, then every generation collection under the prefix (alias first: none dangles)."""
        client = self.connect()
        client.alias.delete(alias_name=self.prefix)
        for name in client.collections.list_all(simple=True):
            if is_generation_collection(self.prefix, name):
                client.collections.delete(name)
        self._status = None
        self._target = None


# -- incremental updates published during a build ---------------------------------------------------------

REPLAY_KEY = "scout:weaviate:replay:"


def replay_record(prefix: str, generation: str, pks: Sequence[int]) -> None:
    """Remember an incremental update (its generation and tools) for a full build running meanwhile."""
    from catalog.cachesafe import shared_cache
    from catalog.locks import named_lock

    cache = shared_cache()
    for _ in range(200):
        with named_lock(f"weaviate-replay:{prefix}", ttl=10) as held:
            if held:
                entries = cache.get(REPLAY_KEY + prefix) or []
                entries = [*entries, (generation, [int(pk) for pk in pks])][-1000:]
                cache.set(REPLAY_KEY + prefix, entries, timeout=settings.SCOUT_WEAVIATE_BUILD_LOCK_SECONDS)
                return
        time.sleep(0.01)
    logger.warning("weaviate: could not record incremental update %s for replay; reconcile will repair", generation)


def replay_since(prefix: str, generation: str) -> list[int]:
    """Tools of incremental updates whose generation is newer than ``generation`` (a full build's): their
    changes may have committed after the build loaded its tools."""
    from catalog.cachesafe import shared_cache

    from ..models import IndexGeneration

    entries = shared_cache().get(REPLAY_KEY + prefix) or []
    if not entries:
        return []
    ids = dict(
        (str(token), pk)
        for pk, token in IndexGeneration.objects.filter(token__in=[g for g, _ in entries] + [generation]).values_list(
            "id", "token"
        )
    )
    built = ids.get(generation, 0)
    return sorted({pk for token, pks in entries if ids.get(token, 0) > built for pk in pks})


def _generation_order(prefix: str, name: str) -> int:
    """Age of a generation collection: its IndexGeneration's id (0, the oldest, when unknown)."""
    from ..models import IndexGeneration

    token = name[len(prefix) + 1 :]
    for generation in IndexGeneration.objects.values_list("id", "token").order_by("-id")[:200]:
        if generation[1].hex == token.lower():
            return int(generation[0])
    return 0


def _indexed_tools(pks: Collection[int] | None) -> list[IndexedTool]:
    """Indexable tools (all, or those among ``pks``) with their stored vectors."""
    from ..encoder import model_key
    from ..selectors import stored_vectors, tool_docs_load

    docs = tool_docs_load(pks=pks)
    vectors = stored_vectors(docs=docs, model_key=model_key())
    return [IndexedTool(doc, vectors.get(doc.pk)) for doc in docs]
