"""One model pass per search request (SCOUT_SEARCH_ONE_PASS_PARTS): the part vectors are pooled from the
request's token embeddings over each part's characters; the request vector is the one encoded alone."""

import numpy as np
import pytest

from search.encoder import query_cache
from search.engine.decompose import request_part_spans
from search.onnx_encoder import span_tokens
from search.services import tool_search

pytestmark = pytest.mark.slow

MULTI_STEP = "Get the weather in Oslo. Then book a table; finally send an invite"


@pytest.fixture
def one_pass(encoder, settings):
    """The session's real ONNX encoder with one-pass parts on, and an empty request cache."""
    assert encoder.runtime == "onnx"
    settings.SCOUT_SEARCH_ONE_PASS_PARTS = True
    query_cache().clear()
    yield encoder
    query_cache().clear()


def test_parts_keep_their_character_spans_in_the_request():
    request = "find it, then read the file. Then ok. finally send an email to bob"
    parts = request_part_spans(request)
    assert [part.text for part in parts] == ["find it read the file ok", "send an email to bob"]
    assert parts[0].spans == ((0, 7), (14, 27), (34, 36))  # short pieces joined to their neighbour
    for part in parts:
        assert part.text == " ".join(request[start:end] for start, end in part.spans)


def test_the_request_vector_is_the_one_encoded_alone(one_pass):
    parts = request_part_spans(MULTI_STEP)
    vectors = one_pass.encode_request(MULTI_STEP, parts)
    assert vectors.shape == (1 + len(parts), one_pass.dim)
    np.testing.assert_allclose(vectors[0], one_pass.encode([MULTI_STEP])[0], atol=1e-6)
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-6)


def test_a_requests_parts_come_from_one_model_call(one_pass):
    parts = request_part_spans(MULTI_STEP)
    assert len(parts) == 3
    runs = one_pass.runner.runs
    vectors = one_pass.encode_request(MULTI_STEP, parts)
    assert one_pass.runner.runs == runs + 1
    one_pass.encode_request(MULTI_STEP, parts)  # cached with its request: no model call
    assert one_pass.runner.runs == runs + 1
    alone = one_pass.encode([part.text for part in parts])
    # Pooled in context: near each part's own vector (the same step), but not it.
    for pooled, own in zip(vectors[1:], alone, strict=True):
        assert 0.6 < float(pooled @ own) < 0.999


def test_without_the_setting_each_part_is_encoded_alone(encoder, settings):
    settings.SCOUT_SEARCH_ONE_PASS_PARTS = False
    query_cache().clear()
    parts = request_part_spans(MULTI_STEP)
    runs = encoder.runner.runs
    vectors = encoder.encode_request(MULTI_STEP, parts)
    np.testing.assert_allclose(vectors, encoder.encode([MULTI_STEP, *(p.text for p in parts)]), atol=1e-6)
    assert encoder.runner.runs - runs >= 2  # the request and its (shorter) parts are padded apart


def test_tool_search_encodes_a_multi_step_request_once(one_pass, small_catalog, reindex):
    from search.services import index_rebuild

    reindex(index_rebuild)
    visible = {t.pk for t in small_catalog.values()}
    runs = one_pass.runner.runs
    result = tool_search(query="get the weather forecast for Lyon, then send an email to the team", visible=visible)
    assert result.confidence == "high"
    assert {"weather::get_forecast", "mail::send_email"} <= {m.tool_id for m in result.matches}
    assert one_pass.runner.runs == runs + 1


# Over the small catalog: a multi-step request it fits only loosely (served, low confidence) and one it
# does not fit at all (withheld).
LOOSE_FIT = "water the plants on the balcony, then send the watering schedule to my neighbour"
NO_FIT = "paint the garden fence blue, then feed the goldfish twice"


def test_a_multi_step_request_served_with_low_confidence_costs_one_model_run(one_pass, small_catalog, reindex):
    """Only an answer that would be withheld is asked again with the parts encoded alone: a weak answer that
    is served is served from the request's one model pass (it was searched twice before: issue 9)."""
    from search.engine.ranking import Confidence
    from search.services import index_rebuild

    reindex(index_rebuild)
    visible = {t.pk for t in small_catalog.values()}
    runs, calls = one_pass.runner.runs, one_pass.calls
    served = tool_search(query=LOOSE_FIT, visible=visible, top_k=5)
    assert served.confidence is Confidence.LOW and served.matches
    assert one_pass.runner.runs == runs + 1
    assert one_pass.calls == calls + 1


def test_an_answer_that_would_be_withheld_is_the_one_the_parts_encoded_alone_give(
    one_pass, small_catalog, reindex, settings
):
    from search.engine.ranking import Confidence
    from search.services import index_rebuild

    reindex(index_rebuild)
    visible = {t.pk for t in small_catalog.values()}
    settings.SCOUT_SEARCH_ONE_PASS_PARTS = False
    today = tool_search(query=NO_FIT, visible=visible, top_k=5, enforce_abstention=False)
    assert today.confidence is Confidence.NONE
    settings.SCOUT_SEARCH_ONE_PASS_PARTS = True
    query_cache().clear()
    runs = one_pass.runner.runs
    served = tool_search(query=NO_FIT, visible=visible, top_k=5, enforce_abstention=False)
    assert one_pass.runner.runs > runs + 1  # the request's pass, then its parts alone
    assert served.confidence == today.confidence
    assert [(m.tool_id, m.score) for m in served.matches] == [(m.tool_id, m.score) for m in today.matches]


def test_parts_the_truncation_cut_off_are_encoded_alone(one_pass):
    request = "open the report, then " + "summarise " * 300 + "; finally email the team"
    parts = request_part_spans(request)
    assert [part.text for part in parts][::2] == ["open the report", "email the team"]
    runs = one_pass.runner.runs
    vectors = one_pass.encode_request(request, parts)
    # The request's pass, then the two parts it cut off, alone (256 and 5 tokens: padded apart).
    assert one_pass.runner.runs == runs + 3
    alone = one_pass.encode([part.text for part in parts])
    np.testing.assert_allclose(vectors[0], one_pass.encode([request])[0], atol=1e-6)
    assert float(vectors[1] @ alone[0]) < 0.999  # within the model's length: pooled from the request
    np.testing.assert_allclose(vectors[2:], alone[1:], atol=1e-6)  # cut (partly or wholly): alone


@pytest.mark.parametrize(
    "request_text",
    [
        "Créer un ticket pour le bug de connexion；envoyer un e-mail à l'équipe",
        "查找 Zürich 的天气 forecast，发送 e-mail 给 équipe 的 members",
    ],
)
def test_spans_map_to_the_parts_tokens_in_non_ascii_text(one_pass, request_text):
    """Character spans (not bytes) pick exactly the tokens the part has when tokenised alone."""
    tokenizer = one_pass.runner.tokenizer
    parts = request_part_spans(request_text)
    assert len(parts) == 2
    encoding = tokenizer.encode(request_text)
    for part in parts:
        members = span_tokens(encoding.offsets, encoding.special_tokens_mask, part.spans, truncated=False)
        alone = tokenizer.encode(part.text, add_special_tokens=False)
        assert [encoding.tokens[t] for t in members] == alone.tokens


def test_a_model_gone_before_the_parts_alone_keeps_the_first_answer(one_pass, small_catalog, reindex, monkeypatch):
    """The second look is a refinement: a model that fails between the request's pass and the parts encoded
    alone leaves the one-pass answer served, not an error (fault injected into the real encoder)."""
    from search.encoder import EncoderUnavailable
    from search.engine.ranking import Confidence
    from search.services import index_rebuild

    reindex(index_rebuild)
    visible = {t.pk for t in small_catalog.values()}
    first = tool_search(query=NO_FIT, visible=visible, top_k=5, enforce_abstention=False)
    assert first.confidence is Confidence.NONE  # so the parts alone are asked for

    def gone(texts, scope=""):
        raise EncoderUnavailable("model unloaded")

    query_cache().clear()
    monkeypatch.setattr(one_pass, "encode_queries", gone)
    served = tool_search(query=NO_FIT, visible=visible, top_k=5, enforce_abstention=False)
    assert served.matches and not served.degraded
    assert served.confidence is Confidence.NONE


def test_a_requests_parts_encoded_alone_share_one_model_call(encoder):
    """The retry of a withheld answer encodes the parts alone: short texts of unlike lengths, one model call
    (a call costs more than their padding), with the vectors each gets in a call of its own."""
    texts = [part.text for part in request_part_spans(MULTI_STEP)]
    lengths = [len(encoder.runner.tokenizer.encode(text).ids) for text in texts]
    assert max(lengths) > 1.25 * min(lengths)  # unlike lengths: a rule by length share alone would split them
    runs = encoder.runner.runs
    vectors = encoder.runner.encode(texts, 16)
    assert encoder.runner.runs == runs + 1
    for text, vector in zip(texts, vectors, strict=True):
        np.testing.assert_allclose(vector, encoder.runner.encode([text], 1)[0], atol=1e-6)
