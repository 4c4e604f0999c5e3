"""An updated snapshot (the changed tools' tokens and vectors computed, every other tool's reused) equals a
snapshot built whole from the same documents and vectors: same rows, term frequencies, vector bits, tie keys
and error bounds, so the same answers. Adds (new words, new pks among the old ones), changes (text, vectors,
examples, negatives, learned requests), removals, and a chain of updates, with float32 and int8 tables.
Then the embedded backend: another process's snapshot follows a sync by updating, not rereading every tool.
"""

from dataclasses import replace

import numpy as np
import pytest

from catalog.models import Tool
from search.backends import SearchRequest, backend_get
from search.backends.embedded import EmbeddedBackend
from search.backends.ranked import SnapshotDense, rank_request
from search.choices import SearchEventKind
from search.documents import ToolDoc
from search.engine.decompose import request_parts
from search.engine.snapshot import DocVectors, IndexSnapshot
from search.models import IndexGeneration, LearnedRequest, SearchEvent, ToolEmbedding
from search.selectors import snapshot_vectors, stored_vectors, tool_docs_load
from search.services import index_rebuild, index_update, tool_search
from search.usage import learned_index_flush, learned_key

from .factories import ToolFactory

DIM = 24
VERBS = ["get", "list", "create", "update", "delete", "send"]
NOUNS = ["issue", "file", "message", "invoice", "user", "ticket", "page"]


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def doc_vectors(doc: ToolDoc, rng: np.random.Generator) -> DocVectors:
    negatives = unit(rng.standard_normal((len(doc.negatives), DIM))) if doc.negatives else None
    block, kinds, texts = doc.vector_rows(unit(rng.standard_normal((len(doc.dense_texts()), DIM))))
    return DocVectors(block, kinds, texts, negatives)


def _taught(pk: int) -> tuple[tuple[str, float], ...]:
    """Tools taught by several requests (every 13th): they also get a learned centroid vector."""
    return (("first wording", 0.6), ("second wording", 0.7)) if pk % 13 == 0 else ()


def catalog(rng: np.random.Generator) -> tuple[list[ToolDoc], dict[int, DocVectors]]:
    docs = []
    for server in range(3):
        for verb in VERBS:
            for noun in NOUNS:
                pk = 2 * len(docs) + 1  # odd pks: new tools can land between old ones
                docs.append(
                    ToolDoc(
                        pk=pk,
                        tool_id=f"s{server}::{verb}_{noun}",
                        name=f"{verb}_{noun}",
                        server=f"s{server}",
                        description=f"{verb.title()} a {noun} on server {server}.",
                        title="Old (Deprecated)" if pk % 5 == 0 else "",  # kept rows' marks are reused
                        examples=(f"please {verb} my {noun}",) if pk % 3 == 0 else (),
                        negatives=(f"never {verb} a {noun}",) if pk % 7 == 0 else (),
                        learned=((f"{noun} {verb} thing", 0.5),) if pk % 11 == 0 else _taught(pk),
                        learned_centroid=0.7 if pk % 13 == 0 else 0.0,
                        read_only=pk % 4 == 1,  # kept rows' classes are reused
                        parameters=("path (string, required)",) if pk % 6 == 1 else (),  # and whether they take input
                    )
                )
    return docs, {doc.pk: doc_vectors(doc, rng) for doc in docs}


def change(docs, vectors, rng, step: int):
    """Docs added, changed and removed: (changed docs, their vectors, removed pks, every doc afterwards)."""
    by_pk = {doc.pk: doc for doc in docs}
    pks = sorted(by_pk)
    changed = [
        replace(
            by_pk[pks[i]],
            description=f"Quarantine the zebrafish{step} {i} records." + (" DEPRECATED: use zorp." if i % 2 else ""),
            title="",
            examples=("zorp it",),
            read_only=not by_pk[pks[i]].read_only,
            parameters=() if by_pk[pks[i]].parameters else ("query (string, required)",),
        )
        for i in rng.choice(len(pks), 5, replace=False)
    ]
    changed += [replace(by_pk[pks[i]], negatives=("not this one",)) for i in rng.choice(len(pks), 2, replace=False)]
    changed = list({doc.pk: doc for doc in changed}.values())
    taken = {doc.pk for doc in changed}
    removed = [pk for pk in rng.choice(pks, 6, replace=False).tolist() if pk not in taken]
    free = sorted(set(range(2, 2 * len(pks) + 40, 2)) - set(pks))
    added = [
        ToolDoc(
            pk=pk,
            tool_id=f"new{step}::tool_{pk}",
            name=f"frobnicate_{pk}",
            server=f"new{step}",
            description=f"Frobnicate widget {pk} for step {step}.",
        )  # fmt: skip
        for pk in rng.choice(free, 4, replace=False).tolist()
    ]
    incoming = changed + added
    new_vectors = {doc.pk: doc_vectors(doc, rng) for doc in incoming if doc.pk % 5}  # some without vectors
    # Shorter than the kept unit vectors: the int8 error bound (largest norms) must still count those.
    new_vectors = {pk: replace(v, vectors=v.vectors * np.float32(0.9)) for pk, v in new_vectors.items()}
    everything = {**by_pk, **{doc.pk: doc for doc in incoming}}
    for pk in removed:
        everything.pop(pk)
    all_vectors = {pk: v for pk, v in vectors.items() if pk in everything and pk not in taken}
    all_vectors.update(new_vectors)
    return incoming, new_vectors, removed, [everything[pk] for pk in sorted(everything)], all_vectors


def sparse_rows(snapshot: IndexSnapshot) -> dict[int, dict[str, float]]:
    words = {col: word for word, col in snapshot.sparse.vocab.items()}
    coo = snapshot.sparse.tf.tocoo()
    rows: dict[int, dict[str, float]] = {}
    for row, col, value in zip(coo.row.tolist(), coo.col.tolist(), coo.data.tolist(), strict=True):
        rows.setdefault(int(snapshot.pks[row]), {})[words[col]] = value
    return rows


def assert_same_table(updated, whole) -> None:
    assert updated.dim == whole.dim and updated.quantized == whole.quantized
    if whole.quantized:  # the same int8 rows, scales and bound
        new, old = updated._int8, whole._int8
        assert (new.residual, new.quantized_norm) == (old.residual, old.quantized_norm)
        assert np.array_equal(new.scale, old.scale)
        assert np.array_equal(new.stored_rows(), old.stored_rows())
    assert np.array_equal(updated.offsets, whole.offsets) and np.array_equal(updated.owner, whole.owner)
    assert updated.kinds == whole.kinds and updated.examples == whole.examples
    assert np.array_equal(updated.matrix, whole.matrix)
    starts, ends = whole.offsets[:-1], whole.offsets[1:]
    assert np.array_equal(updated.exact_rows(starts, ends), whole.exact_rows(starts, ends))


def assert_same_snapshot(updated: IndexSnapshot, whole: IndexSnapshot) -> None:
    assert updated.docs == whole.docs
    assert np.array_equal(updated.pks, whole.pks) and np.array_equal(updated.tie_keys, whole.tie_keys)
    assert sparse_rows(updated) == sparse_rows(whole)
    assert np.array_equal(updated.sparse.lengths, whole.sparse.lengths)
    assert updated.tool_ops == whole.tool_ops and updated.negative_terms == whole.negative_terms
    assert updated.name_words == whole.name_words
    assert np.array_equal(updated.deprecated, whole.deprecated)
    assert np.array_equal(updated.read_only, whole.read_only)
    assert np.array_equal(updated.takes_input, whole.takes_input) and updated.takes_input.any()
    assert updated.learned_terms == whole.learned_terms
    assert updated.missing_vectors == whole.missing_vectors
    assert_same_table(updated.dense, whole.dense)
    assert_same_table(updated.negatives, whole.negatives)


def answers(snapshot: IndexSnapshot, rng: np.random.Generator) -> list:
    """Every figure of the answers to a fixed set of requests (whole and multi-step, two visible sets)."""
    result = []
    every = [int(pk) for pk in snapshot.pks]
    for i in range(12):
        text = f"{VERBS[i % 6]} the {NOUNS[i % 7]}" + (" and then send a zebrafish message" if i % 3 == 0 else "")
        vector = unit(rng.standard_normal(DIM))
        parts = tuple((part, unit(rng.standard_normal(DIM))) for part in request_parts(text))
        for visible in (every, every[::2]):
            for fusion in ("convex", "rrf"):
                request = SearchRequest(text, frozenset(visible), 8, fusion, vector, parts)
                found = rank_request(snapshot, request, SnapshotDense(snapshot, vector, [p for _, p in parts]),
                                     backend="test")  # fmt: skip
                result.append((found.confidence, found.matches))
    return result


@pytest.mark.parametrize("quantized", [False, True], ids=["float32", "int8"])
def test_updated_snapshot_equals_a_whole_rebuild(quantized, settings):
    rng = np.random.default_rng(3)
    docs, vectors = catalog(rng)
    snapshot = IndexSnapshot(docs, vectors, generation="0", quantized=quantized)
    for step in range(1, 4):  # a chain: each update starts from the previous update
        incoming, new_vectors, removed, docs, vectors = change(docs, vectors, rng, step)
        snapshot = snapshot.updated(incoming, new_vectors, removed, generation=str(step))
        whole = IndexSnapshot(docs, vectors, generation=str(step), quantized=quantized)
        assert_same_snapshot(snapshot, whole)
        assert answers(snapshot, np.random.default_rng(step)) == answers(whole, np.random.default_rng(step))
        assert any(m for _, matches in answers(snapshot, np.random.default_rng(step)) for m in matches)
    assert snapshot.dense.spill_waste() == (snapshot.dense._spill.rows - len(snapshot.dense) if quantized else 0)
    assert snapshot.sparse.unused_words() > 0 == whole.sparse.unused_words()  # words of replaced and removed tools


def test_the_old_snapshot_is_unchanged_by_an_update():
    rng = np.random.default_rng(4)
    docs, vectors = catalog(rng)
    snapshot = IndexSnapshot(docs, vectors, generation="0", quantized=True)
    before = answers(snapshot, np.random.default_rng(1))
    incoming, new_vectors, removed, _, _ = change(docs, vectors, rng, 1)
    snapshot.updated(incoming, new_vectors, removed, generation="1")
    assert_same_snapshot(snapshot, IndexSnapshot(docs, vectors, generation="0", quantized=True))
    assert answers(snapshot, np.random.default_rng(1)) == before


def test_another_process_follows_a_sync_by_updating(small_catalog, reindex, encoder):
    reindex(index_rebuild)
    other = EmbeddedBackend()  # another process: it hears of generations through the database only
    other.status()
    builds = other.builds
    tool = ToolFactory(server=small_catalog["send_email"].server, name="send_fax", description="Send a fax.")
    removed = small_catalog["list_inbox"]
    removed.enabled = False
    removed.save()
    generation = reindex(index_update, tool_pks=[tool.pk, removed.pk])
    assert IndexGeneration.objects.get(pk=generation.pk).tool_pks == sorted([tool.pk, removed.pk])
    snapshot = other.snapshot()
    assert snapshot.generation == str(generation.token)
    assert (other.builds, other.updates) == (builds, 1)  # updated, not read whole
    fresh = EmbeddedBackend().snapshot()  # read whole from the database
    assert tool.pk in snapshot.pks and removed.pk not in snapshot.pks
    assert_same_snapshot(snapshot, fresh)


def test_a_generation_without_recorded_tools_is_read_whole(small_catalog, reindex, encoder):
    reindex(index_rebuild)
    other = EmbeddedBackend()
    other.status()
    builds = other.builds
    tool = ToolFactory(server=small_catalog["send_email"].server, name="send_fax", description="Send a fax.")
    generation = reindex(index_update, tool_pks=[tool.pk])
    IndexGeneration.objects.filter(pk=generation.pk).update(tool_pks=None)  # published, not recorded yet
    snapshot = other.snapshot()
    assert tool.pk in snapshot.pks
    assert (other.builds, other.updates) == (builds + 1, 0)


def test_another_process_keeps_a_taught_tools_vectors_until_the_learned_flush(small_catalog, reindex, encoder):
    """Learned requests reach the index in batches (SCOUT_LEARNED_INDEX_INTERVAL). A process reading the catalog in
    that interval (another worker, a restart) found the taught tool's texts changed and its vectors stale, and
    ranked exactly the tools just used on words only: it keeps their last vectors, as the learning process does.
    A curated change still counts as stale, and indexing still encodes the taught tool again."""
    reindex(index_rebuild)
    taught, edited = small_catalog["send_email"], small_catalog["list_inbox"]
    indexed = ToolEmbedding.objects.get(tool=taught)
    text = "mail my landlord about the broken heater"
    LearnedRequest.objects.create(tool=taught, text=text, key=learned_key(text), principal_count=1, confirmations=1)
    edited.description = "Page through the messages of a mailbox, newest first."
    edited.save()
    SearchEvent.objects.all().delete()

    docs = tool_docs_load(pks=[taught.pk, edited.pk])
    assert [doc.learned for doc in docs if doc.pk == taught.pk] != [()]  # the new request is in its texts
    read, reading = snapshot_vectors(docs=docs, model_key=indexed.model_key)
    assert set(reading) == {taught.pk}
    assert [doc.learned for doc in read if doc.pk == taught.pk] == [()]  # read as indexed: nothing learned yet
    assert np.array_equal(reading[taught.pk].vectors, indexed.matrix()[: len(indexed.kinds)])
    assert stored_vectors(docs=docs, model_key=indexed.model_key) == {}  # the indexer encodes both again

    snapshot = EmbeddedBackend().snapshot()  # another process, read whole
    missing = list(SearchEvent.objects.filter(kind=SearchEventKind.VECTORS_MISSING).values_list("detail", flat=True))
    assert len(missing) == 1 and missing[0].startswith("1 of "), missing  # the edited tool only
    assert taught.pk in snapshot.pks


def _answer(backend: EmbeddedBackend, query: str, monkeypatch) -> list:
    """What a search in the process of ``backend`` answers: every match's tool, score and explanation."""
    from search import backends

    with monkeypatch.context() as patch:
        patch.setitem(backends._instances, "embedded", backend)
        found = tool_search(query=query, visible=list(Tool.objects.values_list("pk", flat=True)), top_k=8)
    return [(m.tool_pk, m.score, m.why_matched) for m in found.matches]


def test_another_process_ranks_as_the_learning_process_until_the_learned_flush(
    small_catalog, reindex, encoder, monkeypatch
):
    """Until the batched flush, the learning process ranks a taught tool as last indexed: its vectors and its learned
    words. A process reading the catalog in that interval kept the vectors but read the waiting request's words
    into BM25, so the same request was ranked differently by two workers of one gateway. It now reads the taught
    tool's learned requests as the index holds them (texts, weights, who taught), and agrees."""
    reindex(index_rebuild)
    taught = small_catalog["send_email"]
    first = "forward the invoice to accounting"
    LearnedRequest.objects.create(tool=taught, text=first, key=learned_key(first), principal_count=2, confirmations=2)
    reindex(learned_index_flush)
    learning = backend_get()  # the learning process: its snapshot moves with generations only
    learning.status()

    waiting = "mail my landlord about the broken heater"
    LearnedRequest.objects.create(tool=taught, text=waiting, key=learned_key(waiting), principal_count=1)
    assert LearnedRequest.objects.filter(indexed=False).count() == 1  # the flush has not run
    other = EmbeddedBackend()  # another process starting now: reads every tool whole
    queries = [waiting, "write to the landlord about the heater", first, "send an email"]
    before = [_answer(learning, query, monkeypatch) for query in queries]
    assert [_answer(other, query, monkeypatch) for query in queries] == before
    assert other.snapshot().missing_vectors == learning.snapshot().missing_vectors

    reindex(learned_index_flush)  # both now rank with the waiting request
    after = [_answer(learning, query, monkeypatch) for query in queries]
    assert [_answer(other, query, monkeypatch) for query in queries] == after
    assert after[0] != before[0]  # the request moved its own wording: the check above could tell
