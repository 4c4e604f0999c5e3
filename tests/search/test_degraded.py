"""Degrade, never fail: no model -> BM25 only, flagged; no index -> index_ready=False for direct listing."""

import pytest
from django.test import override_settings

from search.choices import SearchEventKind
from search.encoder import DEFAULT_MODEL_KEY, model_path
from search.models import IndexGeneration, SearchEvent, ToolEmbedding
from search.services import index_rebuild, index_update, tool_search

pytestmark = [pytest.mark.django_db]


@pytest.fixture(scope="session")
def narrow_model(tmp_path_factory) -> str:
    """A second real model: the packaged MiniLM with a 384 -> 64 projection on top, saved as a
    sentence-transformers directory (runtime ``torch``). Same tokens, 64-dimensional vectors."""
    import torch
    from sentence_transformers import SentenceTransformer
    from sentence_transformers.sentence_transformer.modules import Dense

    model = SentenceTransformer(model_path(), device="cpu", local_files_only=True)
    torch.manual_seed(0)
    model.append(Dense(in_features=384, out_features=64, bias=False, activation_function=torch.nn.Identity()))
    path = tmp_path_factory.mktemp("narrow-model")
    model.save(str(path))
    return str(path)


def test_model_failure_gives_flagged_bm25_results(small_catalog, reindex, tmp_path):
    visible = {t.pk for t in small_catalog.values()}
    with override_settings(SCOUT_SEARCH_MODEL=str(tmp_path / "no-such-model")):
        generation = reindex(index_rebuild)
        assert generation.degraded and generation.encoded == 0
        result = tool_search(query="send_email", visible=visible)
    assert result.index_ready and result.degraded
    assert result.matches[0].tool_id == "mail::send_email"
    assert result.matches[0].dense_rank is None and result.matches[0].bm25_rank == 1
    assert SearchEvent.objects.filter(kind=SearchEventKind.MODEL_UNAVAILABLE).exists()


def test_model_that_fails_to_load_from_a_broken_directory(small_catalog, reindex, tmp_path):
    (tmp_path / "config.json").write_text("{not json")
    visible = {t.pk for t in small_catalog.values()}
    with override_settings(SCOUT_SEARCH_MODEL=str(tmp_path)):
        reindex(index_rebuild)
        result = tool_search(query="list_directory", visible=visible)
    assert result.degraded and result.matches[0].tool_id == "files::list_directory"


@pytest.mark.slow
def test_query_time_model_failure_still_uses_bm25(small_catalog, reindex, encoder, tmp_path):
    visible = {t.pk for t in small_catalog.values()}
    reindex(index_rebuild)  # vectors stored with the real model
    with override_settings(SCOUT_SEARCH_MODEL=str(tmp_path / "gone"), SCOUT_SEARCH_MODEL_KEY="all-MiniLM-L6-v2"):
        result = tool_search(query="read_file", visible=visible)
    assert result.degraded and result.matches[0].tool_id == "files::read_file"


def test_no_index_yet_is_flagged_not_failed(small_catalog):
    assert not IndexGeneration.objects.exists()
    result = tool_search(query="send an email", visible={t.pk for t in small_catalog.values()})
    assert result.index_ready is False and result.matches == []
    assert SearchEvent.objects.filter(kind=SearchEventKind.INDEX_NOT_READY).exists()


def test_empty_catalog_index_is_not_ready(db, reindex, tmp_path):
    with override_settings(SCOUT_SEARCH_MODEL=str(tmp_path / "unused")):
        reindex(index_rebuild)
    assert tool_search(query="anything at all", visible={1, 2}).index_ready is False


def test_every_tool_removed_makes_index_not_ready(small_catalog, reindex, tmp_path):
    with override_settings(SCOUT_SEARCH_MODEL=str(tmp_path / "unused")):
        reindex(index_rebuild)
        for tool in small_catalog.values():
            tool.enabled = False
            tool.save()
        reindex(index_update, tool_pks=[t.pk for t in small_catalog.values()])
        result = tool_search(query="send an email", visible={t.pk for t in small_catalog.values()})
    assert result.index_ready is False


def _rows() -> dict[int, tuple[int, bytes]]:
    return {row.tool_id: (row.dim, bytes(row.vectors)) for row in ToolEmbedding.objects.all()}


@pytest.mark.slow
def test_a_failed_or_other_width_encode_writes_no_vector_and_keeps_the_stored_ones(
    small_catalog, reindex, encoder, narrow_model, tmp_path, caplog
):
    """F6: a changed tool reindexed while the model is down, or while a model of another width is configured
    under the same key, gets no vector (BM25 finds it, flagged) and every stored vector stays as it was;
    searching goes on, and the real model's next rebuild encodes the tool again."""
    visible = {t.pk for t in small_catalog.values()}
    reindex(index_rebuild)
    stored = _rows()
    assert {dim for dim, _ in stored.values()} == {384}
    tool = small_catalog["read_file"]
    tool.description = "Return what a text file on the local disk holds."
    tool.save()

    with override_settings(SCOUT_SEARCH_MODEL=str(tmp_path / "gone"), SCOUT_SEARCH_MODEL_KEY=DEFAULT_MODEL_KEY):
        down = reindex(index_update, tool_pks=[tool.pk])
    assert down.degraded and down.encoded == 0 and _rows() == stored

    narrow = {"SCOUT_SEARCH_MODEL": narrow_model, "SCOUT_SEARCH_ENCODER": "torch"}
    with override_settings(**narrow, SCOUT_SEARCH_MODEL_KEY=DEFAULT_MODEL_KEY):
        other = reindex(index_update, tool_pks=[tool.pk])
        assert other.degraded and other.encoded == 0
        assert _rows() == stored  # no 64-wide row beside the 384-wide ones, none replaced
        assert "the model gives 64 dimensions, the vectors stored under 'all-MiniLM-L6-v2' have 384" in caplog.text
        result = tool_search(query="text file on the local disk", visible=visible)
        assert result.index_ready and result.degraded  # its 64-wide query vector is never compared
        assert result.matches[0].tool_id == "files::read_file"

    assert reindex(index_rebuild).encoded == 1  # the changed tool, with the configured model
    result = tool_search(query="what a text file holds", visible=visible)
    assert not result.degraded and result.matches[0].tool_id == "files::read_file"

    with override_settings(**narrow, SCOUT_SEARCH_MODEL_KEY="minilm-64"):  # its own key: its own vectors
        assert reindex(index_rebuild).encoded == len(small_catalog)
    assert {row.dim for row in ToolEmbedding.objects.filter(model_key="minilm-64")} == {64}
