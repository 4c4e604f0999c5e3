"""Learned requests in ranking: real users' words lift their tool, with a capped weight, and are never shown."""

import numpy as np
import pytest

from search.choices import LearnedStatus
from search.models import LearnedConfirmation, LearnedRequest, ToolEmbedding
from search.services import index_rebuild, index_update, tool_search

REQUEST = "did I get anything from my landlord lately"
PARAPHRASE = "has my landlord sent me anything recently"


@pytest.fixture
def indexed(small_catalog, reindex, encoder):
    reindex(index_rebuild)
    return small_catalog


def _everyone(tools) -> set[int]:
    return {t.pk for t in tools.values()}


def _learn(reindex, tool, text: str, principals: int, status: str = LearnedStatus.LEARNED) -> LearnedRequest:
    learned = LearnedRequest.objects.create(
        tool=tool, text=text, key=text, principal_count=principals, confirmations=principals, status=status
    )
    reindex(index_update, tool_pks=[tool.pk])
    return learned


def _learned_vector_norm(tool) -> float:
    row = ToolEmbedding.objects.get(tool=tool)
    return float(np.linalg.norm(row.matrix()[row.kinds.index("learned")]))


def test_a_learned_request_lifts_its_tool_for_another_users_paraphrase(indexed, reindex):
    inbox = indexed["list_inbox"]
    before = tool_search(query=PARAPHRASE, visible=_everyone(indexed), top_k=5)
    assert [m.tool_id for m in before.matches][:1] != ["mail::list_inbox"]
    _learn(reindex, inbox, REQUEST, principals=3)
    after = tool_search(query=PARAPHRASE, visible=_everyone(indexed), top_k=5)
    assert after.matches and after.matches[0].tool_id == "mail::list_inbox"
    assert after.matches[0].why_matched["closest"] == "learned"
    assert REQUEST not in repr(after)  # another user's words are never part of an answer
    assert "example_request" not in after.matches[0].why_matched


def test_weight_grows_with_principals_and_is_capped(indexed, reindex, settings):
    settings.SCOUT_LEARNED_WEIGHT_BASE, settings.SCOUT_LEARNED_WEIGHT_STEP = 0.6, 0.1
    settings.SCOUT_LEARNED_WEIGHT_CAP = 0.9
    inbox = indexed["list_inbox"]
    learned = _learn(reindex, inbox, REQUEST, principals=1)
    one = _learned_vector_norm(inbox)
    for count, expected in ((2, 0.7), (4, 0.9), (1000, 0.9)):
        LearnedRequest.objects.filter(pk=learned.pk).update(principal_count=count)
        reindex(index_update, tool_pks=[inbox.pk])
        assert _learned_vector_norm(inbox) == pytest.approx(expected, abs=1e-3)
    assert one == pytest.approx(0.6, abs=1e-3)  # below a curated example's full weight (unit vectors)


@pytest.mark.parametrize("status", [LearnedStatus.REJECTED, LearnedStatus.PROMOTED])
def test_rejected_or_promoted_rows_are_not_used_as_learned_vectors(indexed, reindex, status):
    inbox = indexed["list_inbox"]
    _learn(reindex, inbox, REQUEST, principals=5, status=status)
    assert "learned" not in ToolEmbedding.objects.get(tool=inbox).kinds


def _centroid_norm(tool) -> float | None:
    row = ToolEmbedding.objects.get(tool=tool)
    # The centroid is the first learned row without text, right after the requests; the learned sums follow
    # it, two per request and two for the centroid (search.documents.learned_sums): an odd count has one.
    textless = [i for i, kind in enumerate(row.kinds) if kind == "learned" and not row.texts[i]]
    if len(textless) % 2 == 0:
        return None
    return float(np.linalg.norm(row.matrix()[textless[0]]))


@pytest.mark.parametrize(("who", "expected"), [(("a", "a", "a"), 0.6), (("a", "b", "c"), 0.8), ("abcdefg", 0.9)])
def test_the_centroid_weighs_the_distinct_principals_who_taught_the_tool(indexed, reindex, settings, who, expected):
    """One principal's many wordings: the centroid counts as that one principal (the base weight); many
    principals lift it, up to the cap. Each wording keeps its own weight (its own principals)."""
    settings.SCOUT_LEARNED_WEIGHT_BASE, settings.SCOUT_LEARNED_WEIGHT_STEP = 0.6, 0.1
    settings.SCOUT_LEARNED_WEIGHT_CAP = 0.9
    inbox = indexed["list_inbox"]
    for i, principal in enumerate(who):
        text = f"{REQUEST} {i}"
        learned = LearnedRequest.objects.create(tool=inbox, text=text, key=text, principal_count=1, confirmations=1)
        LearnedConfirmation.objects.create(learned=learned, principal_key=principal)
    reindex(index_update, tool_pks=[inbox.pk])
    assert _centroid_norm(inbox) == pytest.approx(expected, abs=1e-3)
    assert _learned_vector_norm(inbox) == pytest.approx(0.6, abs=1e-3)
    after = tool_search(query=PARAPHRASE, visible=_everyone(indexed), top_k=5)
    assert REQUEST not in repr(after)


def test_tool_docs_know_who_taught_each_learned_request(indexed):
    """Each learned request carries its teachers (by person) into the index, so one person's many wordings
    count as one teacher in the centroid and in BM25's agreement; a request no confirmation names is its own."""
    from search.selectors import tool_docs_load

    inbox = indexed["list_inbox"]
    rows = []
    for i, principal in enumerate(("u1", "u1", "u2", None)):
        text = f"{REQUEST} {i}"
        rows.append(LearnedRequest.objects.create(tool=inbox, text=text, key=text, principal_count=1, confirmations=1))
        if principal:
            LearnedConfirmation.objects.create(learned=rows[-1], principal_key=principal)
    LearnedConfirmation.objects.create(learned=rows[2], principal_key="u3")
    (doc,) = tool_docs_load(pks=[inbox.pk])
    assert [text for text, _ in doc.learned] == [row.text for row in rows]
    assert doc.learned_teachers == (("u1",), ("u1",), ("u2", "u3"), (f"#{rows[3].pk}",))
    assert doc.learned_centroid == pytest.approx(0.8)  # u1, u2 and u3: the principals the confirmations name
