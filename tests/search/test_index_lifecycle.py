"""Index lifecycle: incremental reindex, the signal path, generations, atomic swaps, the rebuild command."""

import threading
import time
from io import StringIO
from unittest import mock

import pytest
from django.core.management import call_command

from catalog.definitions import normalize_listing
from catalog.services.apply import catalog_apply_listing
from search import selectors
from search.backends import SearchRequest, backend_get
from search.backends.embedded import EmbeddedBackend
from search.choices import GenerationKind
from search.models import IndexGeneration, ToolEmbedding
from search.selectors import tool_docs_load
from search.services import index_rebuild, index_update, tool_search

from .factories import ServerFactory, ToolFactory

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_incremental_reindex_encodes_only_changed_tools(small_catalog, reindex, encoder):
    first = reindex(index_rebuild)
    assert first.encoded == 12 and first.reused == 0
    assert ToolEmbedding.objects.count() == 12
    calls, texts = encoder.calls, encoder.texts_encoded

    tool = small_catalog["get_forecast"]
    tool.purpose = "Plan outdoor events around rain and temperature"
    tool.save()
    unchanged = small_catalog["read_file"]
    generation = reindex(index_update, tool_pks=[tool.pk, unchanged.pk])
    assert (generation.kind, generation.encoded, generation.reused) == (GenerationKind.INCREMENTAL, 1, 1)
    doc = next(d for d in tool_docs_load(pks=[tool.pk]))
    assert encoder.calls == calls + 1
    assert encoder.texts_encoded == texts + len(doc.dense_texts())

    again = reindex(index_rebuild)
    assert again.encoded == 0 and again.reused == 12
    assert encoder.calls == calls + 1  # nothing re-encoded by a full rebuild of unchanged tools


def test_curation_only_change_to_sparse_fields_reuses_vectors(small_catalog, reindex, encoder):
    reindex(index_rebuild)
    tool = small_catalog["send_email"]
    tool.operation_verbs = ["send"]  # changes the dense document text too: re-encoded
    tool.save()
    assert reindex(index_update, tool_pks=[tool.pk]).encoded == 1
    assert reindex(index_update, tool_pks=[tool.pk]).encoded == 0


def test_catalog_change_reindexes_through_the_signal(db, reindex, encoder, django_capture_on_commit_callbacks):
    server = ServerFactory(slug="notes", name="Notes")
    definitions, _, names = normalize_listing(
        [{"name": "append_note", "description": "Append a line to a note.", "inputSchema": {"type": "object"}}],
        max_bytes=65536,
    )
    with django_capture_on_commit_callbacks(execute=True):
        catalog_apply_listing(server=server, definitions=definitions, keep_names=names)
    generation = IndexGeneration.objects.get()
    assert generation.kind == GenerationKind.INCREMENTAL and generation.tool_count == 1 and generation.encoded == 1
    tool_pk = ToolEmbedding.objects.get().tool_id
    result = tool_search(query="append a line to my note", visible={tool_pk})
    assert [m.tool_id for m in result.matches] == ["notes::append_note"]


def test_other_processes_reload_when_the_generation_changes(small_catalog, reindex, encoder):
    reindex(index_rebuild)
    other = EmbeddedBackend()  # stands for another process: it only learns of generations via DB/cache
    first = other.status().generation
    builds = other.builds
    assert other.status().generation == first and other.builds == builds  # no reload while unchanged
    tool = ToolFactory(server=small_catalog["send_email"].server, name="send_fax", description="Send a fax.")
    generation = reindex(index_update, tool_pks=[tool.pk])
    assert other.status().generation == str(generation.token) != first
    assert other.builds == builds and other.updates == 1  # the changed tool read, not every tool


def test_a_search_reads_the_index_generation_once_and_the_next_search_sees_a_new_one(
    small_catalog, reindex, encoder, monkeypatch
):
    reindex(index_rebuild)
    visible = {t.pk for t in small_catalog.values()}
    reads: list[int] = []
    kept = selectors._kept  # the process's kept token, which the search asks (search/selectors.py)
    real_read = kept.read

    def counting_read():  # the real one, its reads counted
        reads.append(1)
        return real_read()

    monkeypatch.setattr(kept, "read", counting_read)
    first = tool_search(query="send an email to my team", visible=visible)
    assert first.index_ready and first.matches
    assert len(reads) == 1  # the backend's status and its search share one read

    tool = ToolFactory(server=small_catalog["send_email"].server, name="send_fax", description="Send a fax.")
    generation = reindex(index_update, tool_pks=[tool.pk])
    reads.clear()
    second = tool_search(query="send a fax", visible=visible | {tool.pk})
    assert len(reads) == 1
    assert second.generation == str(generation.token) != first.generation  # not the previous search's token
    assert "mail::send_fax" in [m.tool_id for m in second.matches]


def test_search_during_rebuild_sees_old_or_new_never_a_mix(small_catalog, reindex, encoder):
    backend = backend_get()
    reindex(index_rebuild)
    visible = {t.pk for t in small_catalog.values()}
    old_token = backend.status().generation
    new_tool = ToolFactory(server=small_catalog["send_email"].server, name="send_fax", description="Send a fax.")
    visible.add(new_tool.pk)
    new_generation = index_update(tool_pks=[new_tool.pk])  # committed in DB, not yet announced
    request = SearchRequest(
        query="send a fax or an email",
        visible=visible,
        top_k=5,
        fusion="convex",
        query_vector=encoder.encode(["send a fax or an email"])[0],
    )
    token = {"value": old_token}
    # Not announced to this process yet: it still trusts the old generation token (as it does for up to
    # SCOUT_SEARCH_GENERATION_CHECK_SECONDS), whatever the clock says.
    with mock.patch("search.backends.embedded.current_generation_token", lambda: token["value"]):
        old_answer = [m.tool_id for m in backend.search(request).matches]
    assert "mail::send_fax" not in old_answer

    seen: list[tuple[bool, list[str], str | None]] = []
    searched_during_build = threading.Event()
    stop = threading.Event()
    building = threading.Event()

    def searcher() -> None:
        while not stop.is_set():
            result = backend.search(request)
            seen.append((building.is_set(), [m.tool_id for m in result.matches], result.generation))
            if building.is_set() and len(seen) > 3:
                searched_during_build.set()

    real_load = tool_docs_load

    def slow_load(**kwargs):
        docs = real_load(**kwargs)
        building.set()
        assert searched_during_build.wait(timeout=30)
        return docs

    with (
        mock.patch("search.backends.embedded.current_generation_token", lambda: token["value"]),
        mock.patch("search.backends.embedded.tool_docs_load", slow_load),
    ):
        thread = threading.Thread(target=searcher)
        thread.start()
        token["value"] = str(new_generation.token)
        backend.snapshot()  # builds the new snapshot in this thread while the searcher keeps going
        building.clear()
        deadline = time.monotonic() + 30
        while len([s for s in seen if s[2] == token["value"]]) < 3 and time.monotonic() < deadline:
            time.sleep(0.001)
        stop.set()
        thread.join(timeout=30)
    new_answer = [m.tool_id for m in backend.search(request).matches]
    assert "notes::append_note" not in new_answer and "mail::send_fax" in new_answer
    assert new_answer != old_answer
    for _during, answer, generation in seen:
        assert (answer, generation) in ((old_answer, old_token), (new_answer, str(new_generation.token)))
    assert any(during and generation == old_token for during, _, generation in seen)


def test_rebuild_command(small_catalog, encoder):
    out = StringIO()
    call_command("search_rebuild", stdout=out)
    generation = IndexGeneration.objects.get()
    assert generation.kind == GenerationKind.FULL and generation.tool_count == 12
    assert f"generation {generation.pk}" in out.getvalue() and "12 tools" in out.getvalue()
