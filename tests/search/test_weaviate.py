"""The Weaviate backend through the real weaviate client against an in-process fake server.

tests/search/fake_weaviate.py implements the Weaviate gRPC service from the client's own stubs and the
REST endpoints the backend uses, so the backend's requests are built and parsed by the real client. Here:
mapping and naming, the query on the wire, failures (a stalled server, UNAVAILABLE, a reset, a server
that returns), refusals (an old server, another model's index) and the index lifecycle (concurrent
builds, updates during a build, a partial batch failure then reconcile). Answers against the embedded
backend: test_weaviate_parity.py. Against a real server: tests/search/contract (WEAVIATE_URL).
"""

import contextvars
import socket
import threading
import uuid
from dataclasses import replace

import numpy as np
import pytest
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.test import override_settings
from weaviate.proto.v1 import base_pb2

from search.backends import SearchRequest
from search.backends.base import IndexedTool
from search.backends.weaviate import (
    EVENT_BACKEND_INCOMPATIBLE,
    EVENT_INDEX_DRIFT,
    FIELD_PROPERTY,
    NEGATIVES_VECTOR,
    TOOL_VECTOR,
    WeaviateBackend,
    WeaviateIncompatible,
    WeaviateUnavailable,
    alias_name,
    collection_name,
    collection_properties,
    connection_settings,
    is_generation_collection,
    server_version_check,
    tool_fingerprint,
    tool_properties,
    tool_uuid,
    tool_vectors,
)
from search.documents import ToolDoc
from search.encoder import model_key
from search.engine.ranking import Confidence
from search.engine.snapshot import DocVectors
from search.events import counters
from search.selectors import generation_token_keep
from search.services import index_rebuild, index_update, tool_search

DOC = ToolDoc(
    pk=7,
    tool_id="mail::send_email",
    name="send_email",
    server="mail",
    server_name="Mail",
    description="Send an email message. Supports attachments.",
    parameters=("to (string, required): recipient",),
    examples=("email my boss the report",),
    negatives=("read my inbox",),
)


def unit(*values: float) -> np.ndarray:
    vector = np.asarray(values, dtype=np.float32)
    return vector / np.linalg.norm(vector)


# -- mapping and naming ----------------------------------------------------------------------------------


def test_properties_carry_identity_and_every_searchable_field():
    properties = tool_properties(DOC, ("document", "summary", "example"), ("doc", "sum", "email my boss the report"))
    assert properties["tool_pk"] == 7 and properties["tool_id"] == "mail::send_email"
    assert properties["server"] == "mail"  # the filterable slug
    assert properties["server_label"] == "mail Mail"  # the searchable label
    assert properties["name_split"] == "send email"
    assert properties["examples"] == "email my boss the report"
    assert properties["summary"] == "Send an email message."
    assert properties["vector_kinds"] == ["document", "summary", "example"]
    assert set(FIELD_PROPERTY.values()) <= set(properties)


def test_schema_declares_every_stored_property():
    declared = {p.name: p for p in collection_properties()}
    assert set(tool_properties(DOC)) | {"model_key", "fingerprint"} == set(declared)
    assert declared["tool_pk"].indexFilterable is True
    assert declared["vector_texts"].indexSearchable is False  # explanations only, never matched
    # BM25 is Scout's (over the caller's visible tools): Weaviate indexes no text for keyword search.
    assert not any(p.indexSearchable for p in declared.values())


def test_generation_collections_and_alias_names():
    token = str(uuid.uuid4())
    name = collection_name("ScoutTools", token)
    assert name == "ScoutTools_" + uuid.UUID(token).hex
    assert is_generation_collection("ScoutTools", name)
    assert not is_generation_collection("ScoutTools", "ScoutTools")
    assert not is_generation_collection("ScoutTools", "OtherTools_abc")
    assert alias_name("ScoutTools") == "ScoutTools"
    with pytest.raises(ImproperlyConfigured):
        alias_name("scout-tools")


def test_object_ids_are_stable_per_tool():
    assert tool_uuid(7) == tool_uuid(7)
    assert tool_uuid(7) != tool_uuid(8)


def test_all_vectors_of_a_tool_go_into_one_multi_vector():
    vectors = DocVectors(np.eye(3, 4, dtype=np.float32), ("document", "summary", "example"), ("a", "b", "c"))
    named = tool_vectors(IndexedTool(DOC, vectors))
    assert list(named) == [TOOL_VECTOR]
    assert np.asarray(named[TOOL_VECTOR]).shape == (3, 4)
    with_negatives = DocVectors(vectors.vectors, vectors.kinds, vectors.texts, np.ones((1, 4), np.float32))
    assert np.asarray(tool_vectors(IndexedTool(DOC, with_negatives))[NEGATIVES_VECTOR]).shape == (1, 4)
    assert tool_vectors(IndexedTool(DOC, None)) is None  # BM25 still finds a tool without vectors


@override_settings(WEAVIATE_URL="https://weaviate.example:8443", WEAVIATE_GRPC_URL="")
def test_connection_settings_from_the_url():
    assert connection_settings() == {
        "http_host": "weaviate.example",
        "http_port": 8443,
        "http_secure": True,
        "grpc_host": "weaviate.example",
        "grpc_port": 50051,
        "grpc_secure": True,
    }


@override_settings(WEAVIATE_URL="")
def test_missing_url_is_a_configuration_error():
    with pytest.raises(ImproperlyConfigured, match="WEAVIATE_URL"):
        connection_settings()


def test_server_version_is_checked():
    server_version_check("1.32.6")
    server_version_check("1.33.0-rc.1")
    for old in ("1.32.5", "1.31.9", "", "unknown"):
        with pytest.raises(WeaviateIncompatible, match="1.32.6"):
            server_version_check(old)


# -- a small catalog with constructed vectors, served by the fake ----------------------------------------

GENERATION = "11111111-2222-3333-4444-555555555555"
DIM = 8


def catalog_docs() -> list[IndexedTool]:
    rng = np.random.default_rng(5)
    words = ["email", "file", "weather", "issue", "calendar", "invoice", "chart", "repository"]
    tools = []
    for pk in range(1, 41):
        topic = words[pk % len(words)]
        doc = ToolDoc(
            pk=pk,
            tool_id=f"s{pk % 5}::{topic}_{pk}",
            name=f"{topic}_{pk}",
            server=f"s{pk % 5}",
            description=f"Work with {topic} items, number {pk}.",
        )
        block = rng.normal(size=(2, DIM)).astype(np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        tools.append(IndexedTool(doc, DocVectors(block, ("document", "summary"), ("", ""))))
    return tools


def unit_vector(seed: int, dim: int = DIM) -> np.ndarray:
    vector = np.random.default_rng(seed).normal(size=dim).astype(np.float32)
    return vector / np.linalg.norm(vector)


@pytest.fixture
def served(fake):
    """A backend connected to the fake, its collection built from ``catalog_docs`` by the backend itself."""
    tools = catalog_docs()
    overrides = {
        "WEAVIATE_URL": fake.url,
        "WEAVIATE_GRPC_URL": fake.grpc_url,
        "SCOUT_WEAVIATE_DROP_GRACE_SECONDS": 0,
        "SCOUT_WEAVIATE_TIMEOUT": 0.5,
        "SCOUT_WEAVIATE_RETRY_SECONDS": 0.1,
    }
    with override_settings(**overrides):
        backend = WeaviateBackend()
        backend.local_refresh(GENERATION, [t.doc for t in tools])
        backend.build(backend.connect(), GENERATION, tools)
        backend.refresh_target()
        generation_token_keep(GENERATION, seconds=3600)
        yield backend, tools
        fake.release.set()
        backend.reset()


def request_for(tools, seed: int = 1, **changes) -> SearchRequest:
    request = SearchRequest(
        query="send the email file",
        visible=frozenset(t.doc.pk for t in tools[:30]),
        top_k=5,
        fusion="convex",
        query_vector=unit_vector(seed),
    )
    return replace(request, **changes)


def test_the_dense_head_query_carries_the_visibility_filter_inside(served, fake):
    backend, tools = served
    fake.requests = []
    result = backend.search(request_for(tools))
    assert result.index_ready and not result.degraded and result.backend == "weaviate"
    sent = fake.requests[0]
    assert sent.filters.target.property == "tool_pk"
    assert sent.filters.operator == base_pb2.Filters.OPERATOR_CONTAINS_ANY
    assert sorted(sent.filters.value_int_array.values) == list(range(1, 31))  # never the hidden 31..40
    assert sent.near_vector.vectors[0].type == base_pb2.Vectors.VECTOR_TYPE_MULTI_FP32
    assert list(sent.near_vector.targets.target_vectors) == [TOOL_VECTOR]
    assert list(sent.metadata.vectors) == [TOOL_VECTOR, NEGATIVES_VECTOR]  # Scout computes the cosines
    assert not sent.HasField("hybrid_search") and not sent.HasField("bm25_search")  # BM25 is Scout's
    assert {m.tool_pk for m in result.matches} <= set(range(1, 31))


def test_multi_step_parts_are_one_filtered_query_each(served, fake):
    backend, tools = served
    parts = (("read the file", unit_vector(2)), ("email it to my boss", unit_vector(3)))
    before = fake.searches
    result = backend.search(request_for(tools, parts=parts))
    assert not result.degraded
    heads = [r for r in fake.requests[-(fake.searches - before) :] if r.HasField("near_vector")]
    assert len(heads) == 3  # the request and each part
    assert all(sorted(r.filters.value_int_array.values) == list(range(1, 31)) for r in heads)


# -- failures: a search answers, degraded, within its deadline -------------------------------------------


def test_a_stalled_server_gives_a_degraded_answer_before_the_stall_ends(served, fake):
    backend, tools = served
    fake.stall = True
    result = backend.search(request_for(tools))
    # The server is still holding the call (it never answered): the search gave up at its deadline.
    assert fake.stalled.is_set() and not fake.release.is_set()
    assert result.degraded and "SCOUT_WEAVIATE_TIMEOUT" in result.degraded_reason
    assert result.index_ready and result.matches  # answered from the BM25 snapshot
    assert {m.tool_pk for m in result.matches} <= set(range(1, 31))
    assert all(m.dense_rank is None for m in result.matches)


def test_unavailable_is_not_retried_past_the_deadline(served, fake):
    """The client retries UNAVAILABLE with back-off (1 + 2 + 4 ... s); the search does not wait for it."""
    backend, tools = served
    fake.unavailable = True
    fake.searches = 0
    with override_settings(SCOUT_WEAVIATE_TIMEOUT=0.2):
        result = backend.search(request_for(tools))
    assert result.degraded and result.matches and result.degraded_reason
    # The client's first retry comes a whole second after the first attempt; the search's deadline is a
    # fifth of that: answering with only the first attempt made proves the retry loop was left behind.
    assert fake.searches == 1


def test_a_server_that_goes_away_and_returns_is_used_again_without_restart(served, fake):
    backend, tools = served
    request = request_for(tools)
    healthy = backend.search(request)
    fake.stop()
    down = backend.search(request)
    assert down.degraded and down.matches and not healthy.degraded
    again = backend.search(request)  # no reconnect on the request path: straight to the fallback
    assert again.degraded
    fake.start()  # same ports
    assert backend.wait_connected(timeout=30)  # the background connector reconnected
    recovered = backend.search(request)
    assert not recovered.degraded
    assert recovered.matches == healthy.matches


@pytest.fixture
def silent_server():
    """A TCP server that accepts connections and never answers: a hung Weaviate."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    accepted, stop = [], threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                accepted.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    for conn in accepted:
        conn.close()
    server.close()


def test_searches_never_wait_for_a_connection(silent_server):
    """Connecting is the background connector's job: while it hangs on a silent server, searches answer."""
    tools = catalog_docs()
    port = silent_server
    with override_settings(WEAVIATE_URL=f"http://127.0.0.1:{port}", WEAVIATE_GRPC_URL=f"grpc://127.0.0.1:{port}"):
        backend = WeaviateBackend()
        backend.local_refresh(GENERATION, [t.doc for t in tools])
        generation_token_keep(GENERATION, seconds=3600)
        try:
            result = backend.search(request_for(tools))
            assert backend._connector.is_alive() and not backend._connected.is_set()  # still connecting
            assert result.index_ready and result.degraded and result.matches
            # "not connected yet", or the connector's first failure when it already gave up once
            assert result.degraded_reason.startswith("weaviate unavailable: ")
            assert {m.tool_pk for m in result.matches} <= set(range(1, 31))
        finally:
            backend.reset()


def test_an_old_server_is_refused_with_a_clear_error(fake):
    fake.version = "1.32.5"
    with override_settings(WEAVIATE_URL=fake.url, WEAVIATE_GRPC_URL=fake.grpc_url):
        backend = WeaviateBackend()
        with pytest.raises(WeaviateIncompatible, match=r"1\.32\.5 is too old: Scout needs >= 1\.32\.6"):
            backend.connect()
        assert "too old" in backend.error
        backend.reset()


def test_vectors_of_another_size_or_model_are_refused_without_flapping(served):
    backend, tools = served
    counters.pop(EVENT_BACKEND_INCOMPATIBLE, None)
    other = backend.search(request_for(tools, query_vector=unit_vector(1, dim=DIM * 2)))
    assert other.degraded and "dimensions" in other.degraded_reason
    backend.search(request_for(tools, query_vector=unit_vector(1, dim=DIM * 2)))
    assert counters[EVENT_BACKEND_INCOMPATIBLE] == 1  # said once
    assert backend._client is not None  # the server is fine: not dropped, not reconnected
    assert not backend.search(request_for(tools)).degraded  # the right vectors are still served
    with override_settings(SCOUT_SEARCH_MODEL_KEY="another-model"):
        refused = backend.search(request_for(tools))
    assert refused.degraded and "another-model" in refused.degraded_reason


def test_a_build_missing_objects_is_never_swapped_in(served, fake):
    backend, tools = served
    live = fake.aliases["ScoutTools"]
    fake.lose_uuids = {tool_uuid(tools[3].doc.pk)}
    with pytest.raises(WeaviateUnavailable, match="holds 39 objects, 40 were written"):
        backend.build(backend.connect(), "99999999-2222-3333-4444-555555555555", tools)
    assert fake.aliases["ScoutTools"] == live  # searches stay on the complete collection
    assert list(fake.collections) == [live]  # the incomplete one is gone


# -- lifecycle (through the services and the database) ---------------------------------------------------


@pytest.fixture
def weaviate_site(weaviate_backend, small_catalog, encoder):
    return weaviate_backend, small_catalog


def unpublished_generation() -> str:
    """A full generation's token, in the database as the indexing service leaves it, not yet published."""
    from search.choices import GenerationKind, GenerationStatus
    from search.models import IndexGeneration

    generation = IndexGeneration.objects.create(
        kind=GenerationKind.FULL, status=GenerationStatus.READY, model_key=model_key()
    )
    return str(generation.token)


def stored(fake, alias="ScoutTools") -> dict[int, dict]:
    return {o["properties"]["tool_pk"]: o for o in fake.objects(alias).values()}


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_concurrent_builds_run_one_at_a_time(weaviate_site, fake, reindex):
    backend, tools = weaviate_site
    reindex(index_rebuild)
    client = backend.connect()
    from search.backends.weaviate import _indexed_tools

    everything = _indexed_tools(None)
    generations = [unpublished_generation() for _ in range(2)]
    errors = []

    def build(generation: str) -> None:
        try:
            backend.build(client, generation, everything)
        except Exception as exc:  # pragma: no cover - the assertion below shows it
            errors.append(exc)

    fake.log.clear()
    threads = [threading.Thread(target=build, args=(g,)) for g in generations]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors
    # Each build's create, writes and swap happen before the other build starts.
    creates = [i for i, entry in enumerate(fake.log) if entry[0] == "create"]
    swaps = [i for i, entry in enumerate(fake.log) if entry[0] == "alias"]
    assert len(creates) == 2 and len(swaps) == 2
    assert creates[0] < swaps[0] < creates[1] < swaps[1]
    # One collection left: the alias target, complete.
    target = fake.aliases["ScoutTools"]
    assert [name for name in fake.collections] == [target]
    assert len(fake.objects(target)) == len(tools)


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_updates_published_during_a_build_are_replayed_after_the_swap(weaviate_site, fake, reindex):
    backend, tools = weaviate_site
    reindex(index_rebuild)
    first = fake.aliases["ScoutTools"]
    full = unpublished_generation()  # a full generation whose build runs (slowly) below
    from search.backends.weaviate import _indexed_tools

    everything = _indexed_tools(None)
    fake.pause_builds = threading.Event()
    builder = threading.Thread(target=backend.build, args=(backend.connect(), full, everything))
    builder.start()
    assert fake.build_paused.wait(30)
    # Meanwhile a tool changes: the update goes to the live collection and is recorded for the build.
    tool = tools["send_email"]
    tool.description = "Send an email message, now with read receipts."
    tool.save()
    reindex(index_update, tool_pks=[tool.pk])
    assert "read receipts" in stored(fake)[tool.pk]["properties"]["description"]
    fake.pause_builds.set()
    builder.join(timeout=60)
    assert fake.aliases["ScoutTools"] != first  # swapped to the new build
    assert "read receipts" in stored(fake)[tool.pk]["properties"]["description"]  # replayed into it
    assert len(stored(fake)) == len(tools)


@pytest.mark.django_db
def test_replay_records_are_kept_over_the_processes_redis_connection(redis_connects):
    """Updates recorded for a running build (each a Celery task: a context of its own) went through Django's
    per-context ``cache``, and their lock through a Redis client of its own: connections per update. Now one."""
    from search.backends.weaviate import replay_record, replay_since

    full, *updates = [unpublished_generation() for _ in range(4)]
    for pk, generation in enumerate(updates, start=1):
        contextvars.Context().run(replay_record, "ScoutTools", generation, [pk, 10])

    assert replay_since("ScoutTools", full) == [1, 2, 3, 10]
    assert replay_since("ScoutTools", updates[1]) == [3, 10]  # only what is newer than the build
    assert len(redis_connects) == 1


@pytest.mark.django_db
@pytest.mark.slow
def test_a_partial_batch_failure_is_found_and_repaired_by_reconcile(weaviate_site, fake, reindex):
    backend, tools = weaviate_site
    reindex(index_rebuild)
    broken, fine = tools["read_file"], tools["write_file"]
    fake.fail_uuids = {tool_uuid(broken.pk)}
    for tool in (broken, fine):
        tool.description += " Also handles symbolic links."
        tool.save()
    with pytest.raises(WeaviateUnavailable, match="1 of 2 objects failed"):
        reindex(index_update, tool_pks=[broken.pk, fine.pk])
    assert "symbolic links" not in stored(fake)[broken.pk]["properties"]["description"]  # diverged
    assert "symbolic links" in stored(fake)[fine.pk]["properties"]["description"]
    fake.fail_uuids = set()
    # An object of a tool that is gone, too (a delete that never reached the server).
    ghost = dict(stored(fake)[fine.pk], uuid=tool_uuid(999999))
    ghost["properties"] = dict(ghost["properties"], tool_pk=999999)
    fake.objects("ScoutTools")[ghost["uuid"]] = ghost
    counters.pop(EVENT_INDEX_DRIFT, None)
    call_command("search_reconcile")
    assert counters[EVENT_INDEX_DRIFT] >= 1
    now = stored(fake)
    assert "symbolic links" in now[broken.pk]["properties"]["description"]
    assert 999999 not in now and len(now) == len(tools)
    from search.backends.weaviate import _indexed_tools

    for tool in _indexed_tools(None):
        assert now[tool.doc.pk]["properties"]["fingerprint"] == tool_fingerprint(tool, model_key())
    assert backend.reconcile() == {"rebuilt": 0, "written": 0, "deleted": 0}  # nothing left to repair


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_readiness_probes_prepare_the_fallback_in_the_background(weaviate_site, reindex):
    backend, tools = weaviate_site
    reindex(index_rebuild)
    backend.reset()  # as a new process: nothing prepared
    assert backend.warm() is False  # the build started in the background; the probe did not wait for it
    assert backend._local_ready.wait(60)
    assert backend.warm() is True
    assert backend.wait_connected(30)  # the connector was started too
    result = tool_search(query="send an email message", visible={t.pk for t in tools.values()})
    assert result.index_ready and not result.degraded


@pytest.mark.django_db
@pytest.mark.slow
def test_services_search_through_weaviate_and_fall_back_when_it_is_gone(weaviate_site, fake, reindex):
    backend, tools = weaviate_site
    hidden = tools["send_email"]
    reindex(index_rebuild)
    assert backend._local is not None  # the fallback was built by the publish, before any search
    visible = {t.pk for t in tools.values() if t.pk != hidden.pk}
    served = tool_search(query="send an email message", visible=visible, top_k=5)
    assert served.backend == "weaviate" and not served.degraded and served.matches
    assert hidden.pk not in {m.tool_pk for m in served.matches}
    fake.stop()
    fallback = tool_search(query="send an email message", visible=visible, top_k=5)
    assert fallback.degraded and fallback.degraded_reason.startswith("weaviate unavailable")
    assert fallback.matches and hidden.pk not in {m.tool_pk for m in fallback.matches}
    assert fallback.confidence is not Confidence.NONE


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_swaps_under_steady_searches_fail_none_keep_the_rollback_window_and_leave_no_dangling_alias(
    weaviate_site, fake, reindex, encoder
):
    """F11: searchers run without pause while two full builds are written, swapped in and the old ones dropped
    (SCOUT_WEAVIATE_KEEP_PREVIOUS=1, a grace > 0): no search fails or degrades, each answers as before the
    builds, the previous collection is kept for rollback and the older one dropped, the alias always names a
    collection that exists; pointing the alias back at the previous one serves the same answers."""
    from search.backends.weaviate import _indexed_tools

    backend, tools = weaviate_site
    with override_settings(SCOUT_WEAVIATE_KEEP_PREVIOUS=1, SCOUT_WEAVIATE_DROP_GRACE_SECONDS=0.2):
        reindex(index_rebuild)
        first = fake.aliases["ScoutTools"]
        visible = frozenset(t.pk for t in tools.values())
        queries = ["send an email", "read a file from disk", "storm warning", "open a ticket", "rename a folder"]
        requests = [
            SearchRequest(query=q, visible=visible, top_k=5, fusion="convex", query_vector=v)
            for q, v in zip(queries, encoder.encode(queries), strict=True)
        ]

        def answer(request: SearchRequest) -> tuple[bool, list[str]]:
            result = backend.search(request)
            return result.degraded or not result.index_ready, [m.tool_id for m in result.matches]

        baseline = [answer(r) for r in requests]
        assert not any(degraded for degraded, _ in baseline)
        assert [ids[0] for _, ids in baseline] == [
            "mail::send_email",
            "files::read_file",
            "weather::get_alerts",
            "tracker::create_issue",
            "files::move_file",
        ]
        seen, failures, dangling = [], [], []
        stop = threading.Event()

        def searcher() -> None:
            while not stop.is_set():
                for index, request in enumerate(requests):
                    with fake.lock:
                        target = fake.aliases.get("ScoutTools")
                        if target not in fake.collections:
                            dangling.append(target)
                    try:
                        seen.append((index, answer(request)))
                    except Exception as exc:  # pragma: no cover - the assertion below shows it
                        failures.append(exc)

        def searched(count: int) -> None:
            wanted = len(seen) + count
            for _ in range(3000):  # at most 30 s: the searchers are stuck, the assertions below say how
                if len(seen) >= wanted or failures:
                    return
                stop.wait(0.01)

        threads = [threading.Thread(target=searcher) for _ in range(3)]
        for thread in threads:
            thread.start()
        collections = [first]
        try:
            for _ in range(2):
                fake.pause_builds, fake.build_paused = threading.Event(), threading.Event()
                builder = threading.Thread(
                    target=backend.build, args=(backend.connect(), unpublished_generation(), _indexed_tools(None))
                )
                builder.start()
                assert fake.build_paused.wait(30)
                searched(20)  # while the new collection is half written
                fake.pause_builds.set()
                builder.join(timeout=60)
                assert not builder.is_alive()
                backend.refresh_target()
                searched(20)  # on the new collection
                collections.append(fake.aliases["ScoutTools"])
                assert set(fake.collections) == set(collections[-2:])  # the previous one kept, older ones dropped
        finally:
            fake.pause_builds = None
            stop.set()
            for thread in threads:
                thread.join(timeout=60)
        assert not failures and not dangling
        assert len(set(collections)) == 3 and first not in fake.collections
        assert len(seen) >= 80
        assert all(result == baseline[index] for index, result in seen)

        # Rollback: the alias back on the previous collection, as an operator would; the same answers.
        backend.connect().alias.update(alias_name="ScoutTools", new_target_collection=collections[1])
        backend.refresh_target()
        assert [answer(r) for r in requests] == baseline
        assert backend.reconcile() == {"rebuilt": 0, "written": 0, "deleted": 0}
