"""A step a request implies without wording it: a text file named as where the result goes is written
(search.engine.decompose.implied_steps), ranked as a part of its own."""

import numpy as np
import pytest

from search.engine.decompose import WRITE_STEP, implied_steps, is_implied
from search.engine.dense import DenseScores
from search.engine.ranking import Branches, RankingOptions, rank
from search.engine.sparse import SparseScores
from search.services import tool_search


@pytest.mark.parametrize(
    "query",
    [
        "Generate a deep report of bitcoin and save it in /root/markdown/bitcoin.md",
        "Help me write a quick start tutorial for Ant Design in markdown at /root/markdown/antd_tutorial.md.",
        "Make a web page about the history of AI based on Wikipedia saved at /root/html/ai.html.",
        "Summarise the open issues and export the list to ./out/issues.csv",
    ],
)
def test_a_text_file_to_save_to_implies_a_write(query):
    assert implied_steps(query) == [WRITE_STEP]


@pytest.mark.parametrize(
    "query",
    [
        "Read the file /root/txt/Android.txt and tell me line 10",  # a file to read, not to write
        "Make a STEINS;GATE introduction PPT and save it to /root/ppt/steins_gate.pptx",  # its own app's tool
        "Scale this video to 1280x720 and save it to a new file at `/home/user/videos/resized.mp4`.",
        "Save the forecast for Oslo",  # nowhere named
        "What is the weather in Oslo?",
    ],
)
def test_no_write_is_implied_without_a_text_file_to_save_to(query):
    assert implied_steps(query) == []


REQUEST = "Give me the forecast for Oslo for the next days and store the summary at /tmp/reports/oslo.md"


def _ids(result) -> list[str]:
    return [m.tool_id for m in result.matches]


@pytest.mark.django_db
@pytest.mark.slow
def test_the_implied_write_finds_the_file_write_tool(indexed):
    result = tool_search(query=REQUEST, visible={t.pk for t in indexed.values()}, top_k=3)
    # Both steps served: the one the request words and the write it implies.
    assert {"weather::get_forecast", "files::write_file"} <= set(_ids(result)[:2])


@pytest.mark.django_db
@pytest.mark.slow
def test_a_hidden_write_tool_is_never_brought_in(indexed):
    visible = {t.pk for name, t in indexed.items() if name != "write_file"}
    result = tool_search(query=REQUEST, visible=visible, top_k=3)
    assert "files::write_file" not in _ids(result)
    assert "weather::get_forecast" in _ids(result)[:2]


def _branches(dense: list[float], implied: bool = False) -> Branches:
    """Dense-only branches over the tools of ``dense`` (no word matched: BM25 adds nothing)."""
    n = len(dense)
    sparse = SparseScores(np.zeros(n), np.zeros(n), ("term",))
    values = np.asarray(dense, np.float32)
    return Branches(sparse, DenseScores(values, values.copy(), np.arange(n + 1)), np.arange(n), implied=implied)


def test_an_implied_step_does_not_push_out_a_worded_steps_tool():
    """The implied write's siblings rank below the worded step's second tool: the step the request words keeps both
    its tools in a top 3, and the implied write still gets its place (LiveMCPBench slot recall .554 -> .571)."""
    # Tools: 0 get_forecast, 1 get_alerts (the worded step's), 2 write_file, 3 edit_file, 4 create_directory.
    whole = _branches([0.8, 0.65, 0.1, 0.1, 0.1])
    worded = _branches([0.8, 0.65, 0.1, 0.1, 0.1])
    implied = _branches([0.1, 0.1, 0.9, 0.75, 0.7], implied=True)
    options = RankingOptions(intent=False)
    ranking = rank(whole, query="q", top_k=3, options=options, tie_keys=np.arange(5), clauses=(worded, implied))
    assert [c.row for c in ranking.candidates[:3]] == [0, 2, 1]
    # A worded step of the same text keeps its full weight: then the write's siblings come first.
    as_worded = _branches([0.1, 0.1, 0.9, 0.75, 0.7])
    ranking = rank(whole, query="q", top_k=3, options=options, tie_keys=np.arange(5), clauses=(worded, as_worded))
    assert [c.row for c in ranking.candidates[:3]] == [2, 0, 3]


def test_only_the_implied_steps_text_is_implied():
    assert is_implied(WRITE_STEP)
    assert not is_implied("write the summary to a file and email it")


@pytest.mark.django_db
@pytest.mark.slow
def test_the_served_search_scores_the_implied_step_at_its_share(indexed):
    """Through tool_search (the parts built as a search builds them): the file write, found by the implied step, has
    ``clause_discount * implied_share`` of the branch shares it has when that step is the whole request."""
    visible = {t.pk for t in indexed.values()}

    def write_score(query: str) -> dict:
        result = tool_search(query=query, visible=visible, top_k=10)
        return next(m for m in result.matches if m.tool_id == "files::write_file").why_matched["score"]

    alone, within = write_score(WRITE_STEP), write_score(REQUEST)
    options = RankingOptions()
    assert within["step"] > 0  # scored by a part: the implied one
    expected = options.clause_discount * options.implied_share * (alone["bm25"] + alone["dense"])
    assert within["bm25"] + within["dense"] == pytest.approx(expected, abs=2e-3)
