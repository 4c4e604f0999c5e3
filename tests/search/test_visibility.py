"""A hidden tool changes nothing a caller sees: not the results, their order, their scores or a count."""

import pytest

from search.services import index_rebuild, tool_search

from .factories import ToolFactory, add_examples

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

QUERIES = [
    "send an email to my team about the outage",
    "list the files in the project directory",
    "weather forecast for tomorrow",
    "open a new issue for the login bug",
    "email",
]


def snapshot_of(result) -> list[tuple]:
    return [(m.tool_id, m.score, m.fused_rank, m.bm25_rank, m.dense_rank, repr(m.why_matched)) for m in result.matches]


def test_hidden_best_match_never_appears_and_changes_nothing(small_catalog, reindex, encoder):
    visible = {t.pk for t in small_catalog.values()}
    reindex(index_rebuild)
    before = {q: tool_search(query=q, visible=visible, top_k=10) for q in QUERIES}
    # A tool built to be the best match for every query, sharing all their words (BM25 statistics) and
    # their meaning (dense), on an existing server.
    hidden = ToolFactory(
        server=small_catalog["send_email"].server,
        name="send_email_list_files_weather_forecast_open_issue",
        description=" ".join(QUERIES) * 3,
    )
    add_examples(hidden, *QUERIES)
    reindex(index_rebuild)
    for query in QUERIES:
        after = tool_search(query=query, visible=visible, top_k=10)
        assert hidden.tool_id not in [m.tool_id for m in after.matches]
        assert snapshot_of(after) == snapshot_of(before[query]), query
        assert after.abstained == before[query].abstained
        # ... while the same tool, made visible, does win: the test would catch a leak.
        shown = tool_search(query=query, visible=visible | {hidden.pk}, top_k=10)
        assert shown.matches[0].tool_id == hidden.tool_id


def test_unknown_pks_in_visible_set_are_ignored(small_catalog, reindex, encoder):
    visible = {t.pk for t in small_catalog.values()}
    reindex(index_rebuild)
    plain = tool_search(query="read a file", visible=visible)
    padded = tool_search(query="read a file", visible=visible | {10**9, 10**9 + 1})
    assert snapshot_of(plain) == snapshot_of(padded)
