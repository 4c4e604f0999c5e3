"""The contract every search backend meets, run through the public services on each backend.

Embedded always; Weaviate only where a server is reachable:
    WEAVIATE_URL=http://localhost:8080 .venv/bin/pytest tests/search/contract -m "weaviate or not weaviate"
"""

import os
import uuid

import pytest
from django.test import override_settings

from search.backends import backend_get
from search.services import index_rebuild, index_update, tool_search

from ..factories import ToolFactory

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

BACKENDS = [
    pytest.param("embedded", id="embedded"),
    pytest.param(
        "weaviate",
        id="weaviate",
        marks=[
            pytest.mark.weaviate,
            pytest.mark.skipif(not os.environ.get("WEAVIATE_URL"), reason="WEAVIATE_URL not set: no Weaviate server"),
        ],
    ),
]


@pytest.fixture(params=BACKENDS)
def backend_name(request, encoder):
    overrides = {"SCOUT_SEARCH_BACKEND": request.param}
    if request.param == "weaviate":  # the server outlives the test database: a fresh alias per test
        overrides["SCOUT_WEAVIATE_PREFIX"] = f"ScoutTest{uuid.uuid4().hex[:12]}"
    with override_settings(**overrides):
        backend_get().reset()
        yield request.param
        if request.param == "weaviate":
            backend_get().drop_all()
        backend_get().reset()


@pytest.fixture
def indexed(backend_name, small_catalog, reindex):
    reindex(index_rebuild)
    return small_catalog


def ids(result) -> list[str]:
    return [m.tool_id for m in result.matches]


def test_not_ready_before_any_index(backend_name, small_catalog):
    assert backend_get().status().ready is False
    assert tool_search(query="send an email", visible={t.pk for t in small_catalog.values()}).index_ready is False


def test_ready_after_rebuild_and_answers(indexed, backend_name):
    status = backend_get().status()
    assert status.ready and status.tool_count == 12 and status.generation
    result = tool_search(query="send_email", visible={t.pk for t in indexed.values()})
    assert result.backend == backend_name and result.index_ready and not result.degraded
    assert ids(result)[0] == "mail::send_email"
    match = result.matches[0]
    assert 0.0 <= match.score <= 1.0 and match.fused_rank == 1 and match.bm25_rank and match.dense_rank
    assert match.why_matched["terms"]


def test_results_respect_visibility_and_top_k(indexed):
    visible = {indexed[name].pk for name in ("read_file", "write_file", "move_file")}
    result = tool_search(query="file", visible=visible, top_k=20)
    assert set(ids(result)) <= {"files::read_file", "files::write_file", "files::move_file"}
    assert len(tool_search(query="file", visible={t.pk for t in indexed.values()}, top_k=2).matches) <= 2


def test_hidden_tool_changes_nothing(indexed, reindex):
    visible = {t.pk for t in indexed.values()}
    before = tool_search(query="send an email", visible=visible, top_k=10)
    hidden = ToolFactory(server=indexed["send_email"].server, name="send_an_email", description="send an email " * 5)
    reindex(index_update, tool_pks=[hidden.pk])
    after = tool_search(query="send an email", visible=visible, top_k=10)
    assert [(m.tool_id, m.score, m.bm25_rank, m.dense_rank) for m in after.matches] == [
        (m.tool_id, m.score, m.bm25_rank, m.dense_rank) for m in before.matches
    ]


def test_removed_tool_disappears(indexed, reindex):
    tool = indexed["close_issue"]
    tool.enabled = False
    tool.save()
    reindex(index_update, tool_pks=[tool.pk])
    assert "tracker::close_issue" not in ids(tool_search(query="close_issue", visible={t.pk for t in indexed.values()}))


def test_nonsense_abstains(indexed):
    result = tool_search(query="qzxv plorkt", visible={t.pk for t in indexed.values()})
    assert result.abstained and result.matches == []
