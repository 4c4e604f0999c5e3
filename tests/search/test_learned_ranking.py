"""Learned requests in ranking (ORM-free, over an in-memory snapshot): in BM25 as a weighted field that
counts below curated text and once per term; a hidden tool's learned requests move nothing."""

from dataclasses import replace

import numpy as np
import pytest

from search.backends import SearchRequest
from search.backends.ranked import SnapshotDense, rank_request
from search.documents import LEARNED_OVER_CURATED, ToolDoc, teachers_mean
from search.engine.ranking import Confidence, RankingOptions
from search.engine.snapshot import IndexSnapshot
from search.engine.sparse import learned_tokens
from search.evaluation import doc_vectors

LEARNED = "did my landlord answer about the rent"
TOOLS = [
    ToolDoc(pk=1, tool_id="mail::list_inbox", name="list_inbox", server="mail", description="List e-mail messages."),
    ToolDoc(pk=2, tool_id="mail::send_email", name="send_email", server="mail", description="Send an e-mail message."),
    ToolDoc(pk=3, tool_id="files::read_file", name="read_file", server="files", description="Read a text file."),
]


def _rank(snapshot: IndexSnapshot, query: str, vector=None, visible=None, **options):
    ranking = snapshot.rank(
        snapshot.branches(query, vector, snapshot.visible_mask(visible)),
        query=query,
        query_vector=vector,
        top_k=3,
        options=RankingOptions(fusion="convex" if vector is not None else "bm25", **options),
    )
    return {snapshot.docs[c.row].tool_id: c for c in ranking.candidates}, ranking


def _with_learned(*learned: tuple[str, float], tool: int = 0) -> list[ToolDoc]:
    docs = list(TOOLS)
    docs[tool] = replace(docs[tool], learned=tuple(learned))
    return docs


def test_learned_words_rank_their_tool_by_bm25_and_are_never_explained():
    before, _ = _rank(IndexSnapshot(TOOLS, None), "landlord rent")
    assert all(c.bm25_score == 0 for c in before.values())  # no tool has these words
    snapshot = IndexSnapshot(_with_learned((LEARNED, 0.6)), None)  # the model down: BM25 alone
    after, ranking = _rank(snapshot, "landlord rent")
    assert next(iter(after)) == "mail::list_inbox" and after["mail::list_inbox"].bm25_score > 0
    why = snapshot.explain(after["mail::list_inbox"].row, -1, ranking.query_terms)
    assert "landlord" not in repr(why) and "rent" not in repr(why)  # another user's words


def test_a_learned_word_counts_once_and_below_a_curated_example():
    one, _ = _rank(IndexSnapshot(_with_learned((LEARNED, 0.6)), None), "landlord")
    # One principal's many wordings with the same word: still one weighted occurrence of it, as two give.
    many = [(f"landlord {'landlord ' * i}".strip(), 0.6) for i in range(30)]
    repeated, _ = _rank(IndexSnapshot(_with_learned(*many), None), "landlord")
    two = [("landlord", 0.6), ("the landlord", 0.6)]
    assert repeated["mail::list_inbox"].bm25_score == pytest.approx(
        _rank(IndexSnapshot(_with_learned(*two), None), "landlord")[0]["mail::list_inbox"].bm25_score
    )
    # At the cap a learned request still counts less than the same words curated as an example request.
    docs = _with_learned(("landlord rent", 0.9), tool=0)
    docs[1] = replace(docs[1], examples=("landlord rent",))
    both, _ = _rank(IndexSnapshot(docs, None), "landlord rent")
    assert both["mail::send_email"].bm25_score > both["mail::list_inbox"].bm25_score > 0
    assert one["mail::list_inbox"].bm25_score > 0


@pytest.fixture(scope="module")
def vectors_for(encoder):
    return lambda texts: encoder.encode(list(texts))


def test_a_hidden_tools_learned_requests_move_nothing(vectors_for):
    request = "send a note to my landlord about the broken heater"
    query = vectors_for([request])[0]
    plain = IndexSnapshot(TOOLS, doc_vectors(TOOLS, vectors_for))
    docs = _with_learned((request, 0.9), ("write to the landlord", 0.6), tool=1)
    docs[1] = replace(docs[1], learned_centroid=0.9)  # with the centroid of its learned requests too
    learned = IndexSnapshot(docs, doc_vectors(docs, vectors_for))
    assert learned.dense.kinds.count("learned") == 3 * 3  # each also summed with the document and the summary
    visible = [1, 3]  # send_email (pk 2), the learning tool, hidden from this caller
    a, ra = _rank(plain, request, query, visible=visible)
    b, rb = _rank(learned, request, query, visible=visible)
    assert list(a) == list(b) and ra.confidence is rb.confidence
    assert np.allclose([c.score for c in a.values()], [c.score for c in b.values()])
    assert np.allclose([c.calibrated for c in a.values()], [c.calibrated for c in b.values()])


WORDINGS = ("did my landlord answer about the rent", "any reply from the landlord yet", "has the landlord written back")


def test_many_principals_wordings_count_together_as_one_capped_centroid(vectors_for):
    """Each wording alone counts at its own (one principal's) weight; the centroid of a tool's learned
    requests counts at the weight of all the principals who taught the tool, never above the cap."""
    request = "landlord got back to me?"
    query = vectors_for([request])[0]
    learned = tuple((text, 0.6) for text in WORDINGS)
    alone = _with_learned(*learned)
    together = _with_learned(*learned)
    together[0] = replace(together[0], learned_centroid=0.8)
    scores = {}
    for name, docs in (("alone", alone), ("together", together)):
        snapshot = IndexSnapshot(docs, doc_vectors(docs, vectors_for))
        ranked, _ = _rank(snapshot, request, query)
        scores[name] = ranked["mail::list_inbox"].dense_score
        kinds = snapshot.dense.kinds[snapshot.dense.offsets[0] : snapshot.dense.offsets[1]]
        assert kinds.count("learned") == 3 * (len(WORDINGS) + (name == "together"))  # and their learned sums
    assert scores["together"] > scores["alone"] + 0.02
    # The centroid row is a unit vector scaled by its weight: the cap holds however many wordings there are.
    pairs = together[0].dense_texts()
    vectors, kinds, texts = together[0].vector_rows(vectors_for([t for _, t in pairs]))
    centroid = len(pairs)  # right after the dense texts' rows, before the learned sums
    assert kinds[centroid] == "learned" and set(texts[centroid:]) == {""}  # no text: nothing to quote
    assert float(np.linalg.norm(vectors[centroid])) == pytest.approx(0.8, abs=1e-4)


def test_one_learned_request_has_no_centroid(vectors_for):
    docs = _with_learned((WORDINGS[0], 0.6))
    docs[0] = replace(docs[0], learned_centroid=0.9)
    _, kinds, _ = docs[0].vector_rows(vectors_for([t for _, t in docs[0].dense_texts()]))
    assert kinds.count("learned") == 3  # its own vector (and its two learned sums) already say all it can


def test_a_word_of_one_learned_request_only_counts_half():
    """A word only one learned request has (often that request's own object or platform name, shared with
    requests for sibling tools) counts half; a word two learned requests agree on counts fully."""
    lone = learned_tokens([("landlord rent", 0.6), ("landlord reply", 0.6)], 2.0)
    assert dict(lone) == pytest.approx({"landlord": 1.2, "rent": 0.6, "reply": 0.6})
    agreed, _ = _rank(IndexSnapshot(_with_learned(("landlord rent", 0.6), ("landlord reply", 0.6)), None), "landlord")
    single, _ = _rank(IndexSnapshot(_with_learned(("landlord rent", 0.6), ("heater reply", 0.6)), None), "landlord")
    assert agreed["mail::list_inbox"].bm25_score > single["mail::list_inbox"].bm25_score > 0


def test_a_learned_request_adds_what_it_has_beyond_a_share_of_its_tools_own_match(vectors_for):
    """A taught tool scores by its best of: its curated vectors, its learned ones, and each learned vector
    plus ``1 - LEARNED_OVER_CURATED`` of its document or summary vector: the learned words add to the tool's
    own match instead of only replacing a weaker one."""
    request = "any news from the landlord?"
    query = vectors_for([request])[0]
    docs = _with_learned((WORDINGS[0], 0.6))
    snapshot = IndexSnapshot(docs, doc_vectors(docs, vectors_for))
    score = float(snapshot.dense.score(query).scores[0])
    pairs = docs[0].dense_texts()
    cosines = dict(zip([kind for kind, _ in pairs], vectors_for([text for _, text in pairs]) @ query, strict=True))
    curated, learned = max(cosines["document"], cosines["summary"]), 0.6 * cosines["learned"]
    expected = max(curated, learned, curated + learned - LEARNED_OVER_CURATED * curated)
    assert score == pytest.approx(expected, abs=1e-5)
    assert curated > 0 and learned > 0 and score > max(curated, learned)  # more than the best of the two


def test_one_principal_lifts_a_tool_by_at_most_the_cap_however_often_and_however_worded(vectors_for):
    """The poisoning cap: one principal's learned requests each weigh ``learned_weight(1)``; repeated (a
    principal counts once per request) or reworded many times, they lift the tool's score by at most that
    weight times the best one's cosine, never more: the wordings do not add up."""
    from django.conf import settings

    from search.documents import learned_weight

    one = learned_weight(1)
    assert one == settings.SCOUT_LEARNED_WEIGHT_BASE < settings.SCOUT_LEARNED_WEIGHT_CAP
    request = "did the landlord answer about the rent"
    query = vectors_for([request])[0]
    plain = IndexSnapshot(TOOLS, doc_vectors(TOOLS, vectors_for))
    base = float(plain.dense.score(query).scores[2])  # read_file: nothing to do with the request
    wordings = [request, *WORDINGS, *(f"{request} {'please ' * i}".strip() for i in range(1, 20))]
    many = _with_learned(*((text, one) for text in wordings), tool=2)
    best = _with_learned((request, one), tool=2)
    lifted = {}
    for name, docs in (("many", many), ("best", best)):
        snapshot = IndexSnapshot(docs, doc_vectors(docs, vectors_for))
        lifted[name] = float(snapshot.dense.score(query).scores[2]) - base
    assert 0 < lifted["many"] <= one + 1e-6
    assert lifted["many"] == pytest.approx(lifted["best"], abs=1e-6)  # the exact request itself is the best


def test_one_teachers_many_wordings_weigh_as_one_teacher_in_the_centroid(vectors_for):
    """The centroid is the mean over the tool's teachers of each one's mean wording: a principal who sends
    many wordings of one request, beside other people's unrelated ones, still lifts the tool by at most one
    principal's weight (without teachers, their wordings would steer the centroid, weighted for three)."""
    from search.documents import learned_weight

    request = "did the landlord answer about the rent"
    query = vectors_for([request])[0]
    honest = (("open the settings file", 0.6), ("show me what the readme says", 0.6))
    attack = tuple((f"{request} {'please ' * i}".strip(), 0.6) for i in range(20))
    docs = {
        "honest": replace(
            TOOLS[2], learned=honest, learned_teachers=(("b",), ("c",)), learned_centroid=learned_weight(2)
        ),
        "poisoned": replace(
            TOOLS[2],
            learned=honest + attack,
            learned_teachers=(("b",), ("c",), *(("a",),) * len(attack)),
            learned_centroid=learned_weight(3),
        ),
    }
    scores = {}
    for name, doc in docs.items():
        snapshot = IndexSnapshot([*TOOLS[:2], doc], doc_vectors([*TOOLS[:2], doc], vectors_for))
        scores[name] = float(snapshot.dense.score(query).scores[2])
    assert 0 < scores["poisoned"] - scores["honest"] <= learned_weight(1) + 1e-6


def test_teachers_mean_weighs_each_teacher_once():
    vectors = np.asarray([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0], [0.0, 1.0]], np.float32)
    assert np.allclose(teachers_mean(vectors, [("a",), ("a",), ("a",), ("b",)]), [0.5, 0.5])
    # A request several people confirmed counts for each of them.
    assert np.allclose(teachers_mean(vectors[2:], [("a", "c"), ("b",)]), [2 / 3, 1 / 3])


def test_a_word_agreed_only_by_one_teachers_wordings_still_counts_half():
    """Agreement means distinct teachers: one person's two wordings sharing a word keep it at half weight."""
    learned = [("landlord rent", 0.6), ("landlord reply", 0.6)]
    one = dict(learned_tokens(learned, 2.0, [("a",), ("a",)]))
    two = dict(learned_tokens(learned, 2.0, [("a",), ("b",)]))
    assert one["landlord"] == pytest.approx(0.6) and two["landlord"] == pytest.approx(1.2)
    ranked = {}
    for name, teachers in (("one", (("a",), ("a",))), ("two", (("a",), ("b",)))):
        docs = _with_learned(*learned)
        docs[0] = replace(docs[0], learned_teachers=teachers)
        ranked[name] = _rank(IndexSnapshot(docs, None), "landlord")[0]["mail::list_inbox"].bm25_score
    assert ranked["two"] > ranked["one"] > 0


def _served(snapshot: IndexSnapshot, request: str, vector: np.ndarray) -> list[tuple[str, Confidence]]:
    """The first tool and the confidence of the answer, as scout_eval ranks it and as tool_search does."""
    _, ranking = _rank(snapshot, request, vector)
    found = rank_request(
        snapshot,
        SearchRequest(request, frozenset(int(pk) for pk in snapshot.pks), 3, "convex", vector),
        SnapshotDense(snapshot, vector, []),
        backend="test",
    )
    return [
        (snapshot.docs[ranking.kept[0].row].tool_id, ranking.confidence),
        (found.matches[0].tool_id, found.confidence),
    ]


def test_high_needs_curated_evidence_not_only_learned_requests(vectors_for):
    """A request whose only support is what one principal taught (its words and vector) ranks the taught tool
    first, served ``low``: an agent trusts ``high`` at once, and learned evidence is not calibrated. The same
    words curated as an example request serve it ``high``, taught or not."""
    from search.documents import learned_weight

    # Close enough to the tool's own text (cosine about .2) that the words it learned, counted in its coverage,
    # would make its evidence enough for ``high``: none of them is in its curated text, so none counts.
    request = "landlord letters received"
    query = vectors_for([request])[0]
    taught = _with_learned((request, learned_weight(1)))
    taught[0] = replace(taught[0], learned_teachers=(("principal-a",),))
    served = _served(IndexSnapshot(taught, doc_vectors(taught, vectors_for)), request, query)
    assert served == [("mail::list_inbox", Confidence.LOW)] * 2
    for docs in (list(TOOLS), taught):
        curated = list(docs)
        curated[0] = replace(curated[0], examples=(request,))
        served = _served(IndexSnapshot(curated, doc_vectors(curated, vectors_for)), request, query)
        assert served == [("mail::list_inbox", Confidence.HIGH)] * 2
