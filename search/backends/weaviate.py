"""The Weaviate backend (weaviate-client v4): Weaviate stores the tools and serves the dense leg.

Ranking. Scout answers with the one ranking every backend uses (``search.backends.ranked``) over an
in-process BM25 snapshot of the current generation (documents and term frequencies, no vectors): BM25,
its statistics over the caller's visible tools only, Scout's tokenizer, fusion, calibration, intent,
negative examples, confidence, the dynamic cut and ``why_matched``. Weaviate serves the dense leg
(``RemoteDense``): for the request and for each part of a multi-step request, one near-vector query with
the caller's visibility filter inside it (``tool_pk`` contains-any the visible pks), run concurrently,
returns the best ``RankingOptions.dense_rank_depth`` visible tools with their vectors. Scout computes
every cosine itself from those vectors (the same float32 arithmetic as the embedded table), scores a tool
not fetched yet at the head's lowest cosine (an upper bound), ranks, fetches any candidate it lacks and
ranks again until every candidate is known. The answer is then the one a full scan of the visible tools
gives: identical to the embedded backend's for the same vectors (tests/search/test_weaviate_parity.py).
Hidden tools are never candidates, never counted, and contribute to no statistic.

Layout. One object per tool (deterministic UUID); all of a tool's vectors go into one self-provided
multi-vector ``tool``, negative examples into ``negatives``. The vectors are the ones stored in the database
(``search.models.ToolEmbedding``); Weaviate vectorizes nothing (no modules). Needs Weaviate >= 1.32.6
(aliases; deletes through an alias), checked at connect.

Lifecycle (``weaviate_lifecycle``): one full build at a time writes a generation's collection aside, counts
it, swaps the alias, replays updates published meanwhile and drops old collections after a grace period;
incremental publishes go through the alias; ``reconcile`` repairs drift. What is stored, and the names, are
in ``weaviate_layout``; their public names are importable from here too.

Failures (SECURITY-TESTS F5). Searches never connect: a background thread connects, checks the server,
and reconnects after a failure. Every call a search makes runs under one deadline
(``SCOUT_WEAVIATE_TIMEOUT``, the client's gRPC retry included). Without a usable server a search is
answered from the BM25 snapshot, which is kept current beforehand, flagged ``degraded`` with the reason.
A server with an older version, or an index built with another model or vector size, is refused with a
clear error (recorded once, not retried per search) until a rebuild or an upgrade.
"""

import logging
import re
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import numpy as np
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from ..documents import ToolDoc
from ..engine.dense import DenseIndex
from ..engine.ranking import Confidence
from ..engine.snapshot import IndexSnapshot
from ..events import search_event_record
from .base import BackendStatus, SearchBackend, SearchRequest, SearchResult
from .ranked import DenseLeg, rank_request, ranking_options
from .weaviate_layout import (
    EVENT_BACKEND_INCOMPATIBLE,
    EVENT_BACKEND_UNAVAILABLE,
    EVENT_INDEX_DRIFT,
    FIELD_PROPERTY,
    HIT_PROPERTIES,
    MIN_SERVER_VERSION,
    NEGATIVES_VECTOR,
    TOOL_VECTOR,
    WeaviateIncompatible,
    WeaviateUnavailable,
    alias_name,
    collection_name,
    collection_properties,
    is_generation_collection,
    tool_fingerprint,
    tool_properties,
    tool_uuid,
    tool_vectors,
    visibility_filter,
)
from .weaviate_lifecycle import WeaviateLifecycle, _indexed_tools, replay_record, replay_since

# Names callers and tests import from here (their home is weaviate_layout or weaviate_lifecycle).
__all__ = [
    "EVENT_BACKEND_INCOMPATIBLE",
    "EVENT_BACKEND_UNAVAILABLE",
    "EVENT_INDEX_DRIFT",
    "FIELD_PROPERTY",
    "NEGATIVES_VECTOR",
    "TOOL_VECTOR",
    "WeaviateBackend",
    "WeaviateIncompatible",
    "WeaviateUnavailable",
    "_indexed_tools",
    "alias_name",
    "collection_name",
    "collection_properties",
    "connection_settings",
    "is_generation_collection",
    "replay_record",
    "replay_since",
    "server_version_check",
    "tool_fingerprint",
    "tool_properties",
    "tool_uuid",
    "tool_vectors",
    "visibility_filter",
]

logger = logging.getLogger(__name__)


def server_version_check(version: str) -> None:
    """Raise WeaviateIncompatible below MIN_SERVER_VERSION."""
    numbers = tuple(int(part) for part in re.findall(r"\d+", version or "")[:3])
    if len(numbers) < 3 or numbers < MIN_SERVER_VERSION:
        wanted = ".".join(map(str, MIN_SERVER_VERSION))
        raise WeaviateIncompatible(
            f"Weaviate {version or '(unknown version)'} is too old: Scout needs >= {wanted} "
            "(collection aliases, and deletes through an alias, fixed in 1.32.6)"
        )


def connection_settings() -> dict[str, Any]:
    """connect_to_custom() arguments from WEAVIATE_URL (+ WEAVIATE_GRPC_URL, WEAVIATE_API_KEY)."""
    url = settings.WEAVIATE_URL
    if not url:
        raise ImproperlyConfigured("SCOUT_SEARCH_BACKEND=weaviate needs WEAVIATE_URL (e.g. http://localhost:8080)")
    http = urlsplit(url)
    if http.scheme not in ("http", "https") or not http.hostname:
        raise ImproperlyConfigured(f"WEAVIATE_URL must be http(s)://host[:port], got {url!r}")
    http_secure = http.scheme == "https"
    grpc_url = settings.WEAVIATE_GRPC_URL
    grpc = urlsplit(grpc_url) if grpc_url else None
    return {
        "http_host": http.hostname,
        "http_port": http.port or (443 if http_secure else 80),
        "http_secure": http_secure,
        "grpc_host": (grpc.hostname if grpc else None) or http.hostname,
        "grpc_port": (grpc.port if grpc else None) or 50051,
        "grpc_secure": (grpc.scheme in ("https", "grpcs")) if grpc else http_secure,
    }


# -- the dense leg ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Fetched:
    """A tool's vectors as Weaviate returned them (None: stored without vectors, or not stored)."""

    vectors: np.ndarray | None
    negatives: np.ndarray | None
    kinds: tuple[str, ...]
    texts: tuple[str, ...]


def fetched_from(obj) -> tuple[int, Fetched]:
    """(tool pk, vectors) of one object of a query reply."""
    named = obj.vector or {}
    properties = obj.properties
    return int(properties["tool_pk"]), Fetched(
        vectors=_matrix(named.get(TOOL_VECTOR)),
        negatives=_matrix(named.get(NEGATIVES_VECTOR)),
        kinds=tuple(properties.get("vector_kinds") or ()),
        texts=tuple(properties.get("vector_texts") or ()),
    )


def _matrix(value) -> np.ndarray | None:
    if value is None:
        return None
    matrix = np.asarray(value, dtype=np.float32)
    if matrix.ndim == 1:
        matrix = matrix[None, :]
    return matrix if matrix.size else None


class RemoteDense:
    """The dense leg served by Weaviate, as a ``ranked.DenseSource``.

    ``head(vectors, limit)`` returns the best ``limit`` visible tools for each vector (the server's filtered
    dense search: ``depth`` + 1 first, deeper where tools tie at the head's end); ``fetch(pks)`` returns
    given tools. Both return {pk: Fetched} and run under the search's deadline. A tool is *known* once its
    vectors (or their absence) came back: its cosine is then computed here exactly. A visible tool not
    known yet is scored, in each branch, at the lowest cosine of that branch's head when the head was full
    (it cannot score higher), else -1 (every visible tool with vectors is in the head). Ranking on those
    upper bounds and fetching every candidate not known yet, until none is, leaves exactly the candidates
    a full scan picks; the head's lowest cosine is below every reported dense rank's, so those agree too.
    """

    def __init__(
        self,
        snapshot: IndexSnapshot,
        visible_rows: np.ndarray,
        vectors: Sequence[np.ndarray],
        *,
        texts: Sequence[str],
        depth: int,
        head: Callable[[Sequence[np.ndarray], int], list[dict[int, Fetched]]],
        fetch: Callable[[Sequence[int]], dict[int, Fetched]],
    ) -> None:
        self.snapshot = snapshot
        self.vectors = [np.asarray(v, dtype=np.float32) for v in vectors]
        self.visible_rows = visible_rows
        self._fetch = fetch
        self.known: dict[int, Fetched] = {}  # row -> vectors
        self.fetched_rows = 0  # rows fetched after the heads (diagnostics, tests)
        self.rounds = 0
        # Unknown rows enter the ranking in BM25 order (their dense score is the same bound), so each
        # round also fetches the next best unknown rows by BM25 of every branch, twice as many each round.
        mask = np.zeros(len(snapshot), dtype=bool)
        mask[visible_rows] = True
        self._by_bm25 = []
        for text in texts:
            scores = snapshot.sparse.score(text, mask).scores
            matched = np.flatnonzero(scores > 0)
            self._by_bm25.append(matched[np.argsort(-scores[matched], kind="stable")])
        self._leg: DenseLeg | None = None
        self.floors = [-1.0] * len(self.vectors)
        asked, limit = list(range(len(self.vectors))), depth + 1
        while asked:
            heads = head([self.vectors[i] for i in asked], limit)  # concurrently, one filtered query per vector
            head_rows = [self._learn(found) for found in heads]
            table = self._table()
            tied = []
            for i, found, rows in zip(asked, heads, head_rows, strict=True):
                if len(found) < limit or not rows:  # every visible tool with vectors is in the head
                    self.floors[i] = -1.0
                    continue
                scores = np.sort(table.score(self.vectors[i]).scores[rows])[::-1]
                self.floors[i] = float(scores[-1])
                if len(scores) >= depth and scores[depth - 1] <= self.floors[i]:
                    tied.append(i)
            # A head whose lowest cosine is also a reported rank's (tools tied at its end, as tools sharing a
            # vector are): a tool left out of it, scored at that bound, would tie a reported tool and could
            # precede it by tool id. Asked again, deeper, until its lowest cosine is below every reported rank.
            asked, limit = tied, 2 * limit

    def _learn(self, found: dict[int, Fetched]) -> list[int]:
        rows = []
        for pk, fetched in found.items():
            row = self.snapshot.row_of(pk)
            if row is not None:
                self.known[row] = fetched
                rows.append(row)
        self._leg = None
        return rows

    def _table(self) -> DenseIndex:
        n = len(self.snapshot)
        per_doc: list[np.ndarray | None] = [None] * n
        kinds: list[tuple[str, ...]] = [()] * n
        texts: list[tuple[str, ...]] = [()] * n
        for row, fetched in self.known.items():
            if fetched.vectors is not None:
                per_doc[row], kinds[row], texts[row] = fetched.vectors, fetched.kinds, fetched.texts
        return DenseIndex(per_doc, kinds, texts)

    def leg(self) -> DenseLeg:
        if self._leg is None:
            table = self._table()
            n = len(self.snapshot)
            known = np.zeros(n, dtype=bool)
            known[list(self.known)] = True
            unknown = self.visible_rows[~known[self.visible_rows]]
            scores = []
            for vector, floor in zip(self.vectors, self.floors, strict=True):
                branch = table.score(vector)
                branch.scores[unknown] = floor  # an upper bound until the row is fetched
                scores.append(branch)
            negatives: list[np.ndarray | None] = [None] * n
            negative_kinds: list[tuple[str, ...]] = [()] * n
            for row, fetched in self.known.items():
                if fetched.negatives is not None:
                    negatives[row], negative_kinds[row] = fetched.negatives, ("negative",) * len(fetched.negatives)
            self._leg = DenseLeg(scores[0], tuple(scores[1:]), table, DenseIndex(negatives, negative_kinds, [()] * n))
        return self._leg

    def complete(self, rows: Sequence[int]) -> bool:
        missing = {int(r) for r in rows} - set(self.known)
        if not missing:
            return False
        self.rounds += 1
        batch = 32 * 2**self.rounds
        for ordered in self._by_bm25:
            unknown = [int(r) for r in ordered[: batch + len(self.known)] if int(r) not in self.known]
            missing.update(unknown[:batch])
        missing = sorted(missing)
        pks = [int(self.snapshot.docs[row].pk) for row in missing]
        found = self._fetch(pks)
        self._learn(found)
        for row in missing:  # not in Weaviate (yet): no vectors, as in a snapshot without them
            self.known.setdefault(row, Fetched(None, None, (), ()))
        self.fetched_rows += len(missing)
        return True


# -- the backend -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """The collection the alias points to and the vectors it holds (read at connect, after a publish)."""

    collection: str | None
    model: str | None
    dim: int | None


class WeaviateBackend(WeaviateLifecycle, SearchBackend):
    name = "weaviate"

    def __init__(self) -> None:
        self._client = None
        self._client_lock = threading.RLock()
        self._calls: ThreadPoolExecutor | None = None
        self._connector: threading.Thread | None = None
        self._wake = threading.Event()
        self._connected = threading.Event()
        self._closed = False
        self.error: str | None = None  # why Weaviate is not used now (None: it is)
        self._incompatible = False
        self._target: Target | None = None
        self._status: tuple[float, BackendStatus] | None = None
        self._local: IndexSnapshot | None = None
        self._local_lock = threading.Lock()
        self._local_ready = threading.Event()

    @property
    def prefix(self) -> str:
        """The alias name (and collection prefix), read per call so a settings override takes effect."""
        return alias_name(settings.SCOUT_WEAVIATE_PREFIX)

    # -- connection (off the request path) ---------------------------------------------------------------
    def _open(self):
        """A connected, checked client (raises WeaviateUnavailable / WeaviateIncompatible)."""
        import weaviate
        from weaviate.classes.init import AdditionalConfig, Auth, Timeout

        api_key = settings.WEAVIATE_API_KEY
        try:
            client = weaviate.connect_to_custom(
                **connection_settings(),
                auth_credentials=Auth.api_key(api_key) if api_key else None,
                additional_config=AdditionalConfig(
                    timeout=Timeout(
                        init=settings.SCOUT_WEAVIATE_CONNECT_TIMEOUT,
                        query=settings.SCOUT_WEAVIATE_TIMEOUT,
                        insert=settings.SCOUT_WEAVIATE_INSERT_TIMEOUT,
                    )
                ),
                skip_init_checks=True,  # no PyPI lookup; the server is checked below
            )
        except ImproperlyConfigured:
            raise
        except Exception as exc:  # refused, DNS, TLS, timeout, auth: all mean "not usable now"
            raise WeaviateUnavailable(f"cannot connect to Weaviate at {settings.WEAVIATE_URL}: {exc}") from exc
        try:
            server_version_check(str(client.get_meta().get("version", "")))
            if not client.is_ready():
                raise WeaviateUnavailable(f"Weaviate at {settings.WEAVIATE_URL} is not ready")
        except WeaviateUnavailable:
            client.close()
            raise
        except Exception as exc:
            client.close()
            raise WeaviateUnavailable(f"Weaviate at {settings.WEAVIATE_URL} failed its checks: {exc}") from exc
        return client

    def connect(self) -> Any:
        """The client, connecting now (publish, maintenance; never a search) if there is none."""
        with self._client_lock:
            if self._client is not None:
                return self._client
            try:
                client = self._open()
            except WeaviateUnavailable as exc:
                self._failed(exc)
                raise
            self._adopt(client)
            return client

    def _adopt(self, client) -> None:
        with self._client_lock:
            if self._client is not None:  # connected meanwhile (a publish and the connector at once)
                client.close()
                return
            self._client = client
            self._calls = ThreadPoolExecutor(max_workers=8, thread_name_prefix="weaviate-call")
            self.error = None
            self._incompatible = False
            self._status = None
        try:
            self._target = self._read_target(client, time.monotonic() + settings.SCOUT_WEAVIATE_TIMEOUT * 4)
        except Exception as exc:
            self._target = None
            logger.info("weaviate: alias target not read at connect: %s", exc)
        self._connected.set()
        logger.info("weaviate: connected to %s", settings.WEAVIATE_URL)

    def start(self) -> None:
        """Start the background connector (idempotent): connects, reconnects after failures, probes health."""
        with self._client_lock:
            if self._connector is not None and self._connector.is_alive():
                return
            self._closed = False
            self._connector = threading.Thread(target=self._connect_loop, name="weaviate-connector", daemon=True)
            self._connector.start()

    def _connect_loop(self) -> None:
        while not self._closed:
            client = self._client
            if client is None:
                try:
                    self._adopt(self._open())
                    continue
                except ImproperlyConfigured as exc:
                    self.error = str(exc)
                    return
                except Exception as exc:
                    self._failed(exc)
            else:
                try:
                    self._call(client.is_ready, deadline=time.monotonic() + settings.SCOUT_WEAVIATE_TIMEOUT * 2)
                except Exception as exc:
                    self._unavailable(exc)
            self._wake.wait(settings.SCOUT_WEAVIATE_RETRY_SECONDS)
            self._wake.clear()

    def wait_connected(self, timeout: float) -> bool:
        """Block until connected (tests, startup scripts)."""
        self.start()
        return self._connected.wait(timeout)

    def _failed(self, exc: Exception) -> None:
        message = f"weaviate: {exc}"[:500]
        if message != self.error:  # once per distinct failure, not per retry
            kind = EVENT_BACKEND_INCOMPATIBLE if isinstance(exc, WeaviateIncompatible) else EVENT_BACKEND_UNAVAILABLE
            search_event_record(kind=kind, detail=message)
            logger.warning("%s", message)
        self.error = message

    def _unavailable(self, exc: Exception) -> None:
        """A call failed: drop the client (its channel, and any retry still sleeping on it) and reconnect."""
        self._failed(exc)
        self._drop_client()
        self._wake.set()

    def _drop_client(self) -> None:
        with self._client_lock:
            client, self._client = self._client, None
            calls, self._calls = self._calls, None
            self._connected.clear()
            self._status = None
        if calls is not None:
            calls.shutdown(wait=False, cancel_futures=True)
        if client is not None:
            try:
                client.close()
            except Exception:  # closing a broken connection must not mask the original error
                logger.debug("weaviate: close failed", exc_info=True)

    def reset(self) -> None:
        self._closed = True
        self._wake.set()
        connector = self._connector
        if connector is not None and connector is not threading.current_thread():
            connector.join(timeout=5)
        self._connector = None
        self._drop_client()
        self._wake.clear()
        self.error = None
        self._incompatible = False
        self._target = None
        with self._local_lock:
            self._local = None
            self._local_ready.clear()

    def _call(self, fn: Callable, *args: Any, deadline: float, **kwargs: Any) -> Any:
        """``fn(*args, **kwargs)`` on a client worker, abandoned at ``deadline`` (retries included)."""
        calls = self._calls
        remaining = deadline - time.monotonic()
        if calls is None:
            raise WeaviateUnavailable("not connected")
        if remaining <= 0:
            raise WeaviateUnavailable("query deadline passed")
        try:
            future = calls.submit(fn, *args, **kwargs)
        except RuntimeError as exc:  # the pool was shut down: the client was dropped meanwhile
            raise WeaviateUnavailable("connection closed") from exc
        try:
            return future.result(timeout=remaining)
        except FutureTimeout as exc:
            future.cancel()
            raise WeaviateUnavailable(
                f"no answer within {settings.SCOUT_WEAVIATE_TIMEOUT}s (SCOUT_WEAVIATE_TIMEOUT)"
            ) from exc

    # -- the local BM25 snapshot (also the fallback) -----------------------------------------------------
    def local_snapshot(self, *, wait: float = 0.0) -> IndexSnapshot | None:
        """The current generation's BM25 snapshot. A stale one is replaced in the background (searches keep
        the old one meanwhile); with none at all, waits up to ``wait`` for the background build."""
        from ..selectors import current_generation_token

        token = current_generation_token()
        if token is None:
            return None
        local = self._local
        if local is not None and local.generation == token:
            return local
        self._local_refresh_async(token)
        if local is None and wait > 0:
            self._local_ready.wait(wait)
            local = self._local
        return local

    def _local_refresh_async(self, token: str) -> None:
        if not self._local_lock.acquire(blocking=False):
            return  # a build is running already
        self._local_lock.release()

        def build() -> None:
            from django.db import connection

            try:
                self.local_refresh(token)
            except Exception:
                logger.exception("weaviate: building the BM25 snapshot failed")
            finally:
                connection.close()

        threading.Thread(target=build, name="weaviate-local-index", daemon=True).start()

    def local_refresh(self, token: str, docs: Sequence[ToolDoc] | None = None) -> IndexSnapshot:
        """Build the BM25 snapshot of ``token`` now (publish; the background builder) from the database's
        tools, or from ``docs`` (an evaluation catalog)."""
        from ..selectors import tool_docs_load

        with self._local_lock:
            local = self._local
            if local is not None and local.generation == token:
                return local
            snapshot = IndexSnapshot(tool_docs_load() if docs is None else docs, None, generation=token)
            self._local = snapshot
            self._local_ready.set()
            return snapshot

    def warm(self) -> bool:
        """Start the connector and the BM25 snapshot's build (readiness probes); True once it is built."""
        self.start()
        return self.local_snapshot() is not None

    # -- status ------------------------------------------------------------------------------------------
    def status(self) -> BackendStatus:
        self.start()
        cached = self._status
        if cached is not None and time.monotonic() - cached[0] < settings.SCOUT_SEARCH_GENERATION_CHECK_SECONDS:
            return cached[1]
        client = self._client
        status = None
        if client is not None:
            try:
                status = self._server_status(client)
            except Exception as exc:
                self._unavailable(exc)
        if status is None:  # searches are answered from the BM25 snapshot
            local = self.local_snapshot(wait=settings.SCOUT_WEAVIATE_TIMEOUT)
            if local is None:
                return BackendStatus(False, None, 0)
            return BackendStatus(len(local) > 0, local.generation, len(local))
        self._status = (time.monotonic(), status)
        return status

    def _server_status(self, client) -> BackendStatus:
        deadline = time.monotonic() + settings.SCOUT_WEAVIATE_TIMEOUT * 2
        target = self._read_target(client, deadline)
        self._target = target
        if target.collection is None:
            return BackendStatus(False, None, 0)
        total = self._count(client, self.prefix, deadline)
        local = self.local_snapshot(wait=max(0.0, deadline - time.monotonic()))
        return BackendStatus(bool(total), local.generation if local else target.collection, total)

    def _read_target(self, client, deadline: float) -> Target:
        alias = self._call(client.alias.get, alias_name=self.prefix, deadline=deadline)
        if alias is None:
            return Target(None, None, None)
        collection = client.collections.use(self.prefix)
        reply = self._call(
            collection.query.fetch_objects,
            limit=1,
            return_properties=["tool_pk", "model_key"],
            include_vector=[TOOL_VECTOR],
            deadline=deadline,
        )
        model = dim = None
        for obj in reply.objects:
            model = obj.properties.get("model_key") or None
            vectors = _matrix((obj.vector or {}).get(TOOL_VECTOR))
            dim = int(vectors.shape[1]) if vectors is not None else None
        return Target(alias.collection, model, dim)

    def refresh_target(self) -> Target | None:
        """Read the alias target and its vectors' model and size again (after a build or an update)."""
        client = self._client
        if client is None:
            return None
        self._target = self._read_target(client, time.monotonic() + settings.SCOUT_WEAVIATE_TIMEOUT * 4)
        self._incompatible = False
        self._status = None
        return self._target

    def _count(self, client, name: str, deadline: float) -> int:
        collection = client.collections.use(name)
        result = self._call(collection.aggregate.over_all, total_count=True, deadline=deadline)
        return int(result.total_count or 0)

    # -- search ------------------------------------------------------------------------------------------
    def search(self, request: SearchRequest) -> SearchResult:
        self.start()
        local = self.local_snapshot(wait=settings.SCOUT_WEAVIATE_TIMEOUT)
        if local is None or len(local) == 0:
            return SearchResult([], index_ready=False, backend=self.name)
        if not request.visible or not local.visible_mask(request.visible).any():  # nothing to rank, as embedded
            return SearchResult(
                [], index_ready=True, confidence=Confidence.NONE, generation=local.generation, backend=self.name
            )
        if request.query_vector is None:  # the model is down: BM25 only, as on every backend
            return rank_request(local, request, None, backend=self.name)
        reason = self._unusable_for(request)
        if reason:
            return self._degraded(local, request, reason)
        try:
            dense = self._remote_dense(local, request)
            return rank_request(local, request, dense, backend=self.name)
        except Exception as exc:
            self._unavailable(exc)
            return self._degraded(local, request, str(exc))

    def _unusable_for(self, request: SearchRequest) -> str | None:
        if self._client is None:
            return self.error or "not connected yet"
        target = self._target
        if target is None or target.collection is None:
            return "no index in Weaviate yet"
        dim = int(request.query_vector.shape[0])
        if target.dim is not None and target.dim != dim:
            return self._refuse(f"index vectors have {target.dim} dimensions, the query {dim}: rebuild the index")
        from ..encoder import model_key

        if target.model is not None and target.model != model_key():
            return self._refuse(f"index built with {target.model}, search uses {model_key()}: rebuild the index")
        return None

    def _refuse(self, message: str) -> str:
        if not self._incompatible:  # recorded once; searches stay on BM25 until a rebuild, never flapping
            search_event_record(kind=EVENT_BACKEND_INCOMPATIBLE, detail=f"weaviate: {message}"[:500])
            self._incompatible = True
        return message

    def _degraded(self, local: IndexSnapshot, request: SearchRequest, reason: str) -> SearchResult:
        from dataclasses import replace

        result = rank_request(local, replace(request, query_vector=None), None, backend=self.name)
        return replace(result, degraded=True, degraded_reason=f"weaviate unavailable: {reason}"[:300])

    def _remote_dense(self, local: IndexSnapshot, request: SearchRequest) -> RemoteDense:
        client = self._client
        if client is None:
            raise WeaviateUnavailable("not connected")
        deadline = time.monotonic() + settings.SCOUT_WEAVIATE_TIMEOUT
        collection = client.collections.use(self.prefix)
        options = ranking_options(request.fusion)
        depth = options.dense_rank_depth
        visible = local.visible_mask(request.visible)
        visible_pks = local.pks[visible]
        if not len(visible_pks):
            raise ValueError("no visible tool is in the index")
        where = visibility_filter(visible_pks.tolist())
        from weaviate.classes.query import MetadataQuery

        def near(vector: np.ndarray, limit: int) -> dict[int, Fetched]:
            reply = collection.query.near_vector(
                near_vector=[vector.tolist()],  # one row: MaxSim is the tool's best vector's dot product
                target_vector=TOOL_VECTOR,
                limit=limit,  # one past the reported ranks at first: the bound then sits below all of them
                filters=where,
                return_properties=HIT_PROPERTIES,
                include_vector=[TOOL_VECTOR, NEGATIVES_VECTOR],
                return_metadata=MetadataQuery(distance=True),
            )
            return dict(fetched_from(obj) for obj in reply.objects)

        def heads(vectors: Sequence[np.ndarray], limit: int) -> list[dict[int, Fetched]]:
            calls = self._calls
            if calls is None:
                raise WeaviateUnavailable("not connected")
            futures = [calls.submit(near, v, limit) for v in vectors]  # one query per part, concurrently
            return [self._wait(f, deadline) for f in futures]

        def fetch(pks: Sequence[int]) -> dict[int, Fetched]:
            reply = self._call(
                collection.query.fetch_objects,
                filters=visibility_filter(pks),
                limit=len(pks),
                return_properties=HIT_PROPERTIES,
                include_vector=[TOOL_VECTOR, NEGATIVES_VECTOR],
                deadline=deadline,
            )
            return dict(fetched_from(obj) for obj in reply.objects)

        vectors = [request.query_vector, *(v for _, v in (request.parts if options.decompose else ()))]
        if any(v is None for v in vectors):
            raise ValueError("a part of the request has no vector")
        texts = [request.query, *(t for t, _ in (request.parts if options.decompose else ()))]
        visible_rows = np.flatnonzero(visible)
        return RemoteDense(local, visible_rows, vectors, texts=texts, depth=depth, head=heads, fetch=fetch)

    @staticmethod
    def _wait(future, deadline: float):
        try:
            return future.result(timeout=max(0.0, deadline - time.monotonic()))
        except FutureTimeout as exc:
            future.cancel()
            raise WeaviateUnavailable(
                f"no answer within {settings.SCOUT_WEAVIATE_TIMEOUT}s (SCOUT_WEAVIATE_TIMEOUT)"
            ) from exc
