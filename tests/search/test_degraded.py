"""Degrade, never fail: no model -> BM25 only, flagged; no index -> index_ready=False for direct listing."""

import pytest
from django.test import override_settings

from search.choices import SearchEventKind
from search.models import IndexGeneration, SearchEvent
from search.services import index_rebuild, index_update, tool_search

pytestmark = [pytest.mark.django_db]


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
