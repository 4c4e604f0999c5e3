"""Words a request says only inside quotes are values it gives a tool (a title, a folder, a file name), not what it
asks for: BM25 counts them at ``sparse.QUOTED_SHARE`` of their score (``text.quoted_only_terms``), their coverage
in full. ORM-free, no model: a small catalog's real BM25 index and ranking."""

import numpy as np
import pytest

from search.documents import ToolDoc
from search.engine.ranking import RankingOptions
from search.engine.snapshot import IndexSnapshot
from search.engine.sparse import QUOTED_SHARE
from search.text import quoted_only_terms


@pytest.mark.parametrize(
    ("request_text", "expected"),
    [
        ('Create a new folder named "Q2 Reports" inside the "Finance" folder.', {"q2", "reports", "finance"}),
        ("Delete the asset with ID '12345' of type 'HDRI' (any type).", {"12345", "hdri"}),  # "type": said outside
        ("Read the file `notes/todo.md`, please", {"notes", "todo", "md"}),
        ("Add the note \u201cBuy milk\u201d to my list", {"buy", "milk"}),
        ("What is Apple's price and the company's profit?", set()),  # apostrophes inside words are no quotes
        ("Show the weather in Oslo", set()),
        # A request that opens with a quote: its opening quote does not make its first words a value.
        ("`Decompile the function at `0x10000120` now", {"0x10000120"}),
    ],
)
def test_the_words_a_request_says_only_in_quotes(request_text, expected):
    assert quoted_only_terms(request_text) == expected


DOCS = [
    ToolDoc(
        pk=1,
        tool_id="finance::create_report_note",
        name="create_report_note",
        server="finance",
        description="Create Q2 finance reports: quarterly finance reports and finance notes.",
    ),
    ToolDoc(
        pk=2,
        tool_id="files::create_folder",
        name="create_folder",
        server="files",
        description="Make a folder.",
    ),
    ToolDoc(pk=3, tool_id="files::delete_file", name="delete_file", server="files", description="Delete a file."),
]


def ranked(snapshot: IndexSnapshot, request_text: str):
    visible = snapshot.visible_mask(None)
    branches = snapshot.branches(request_text, None, visible)  # BM25 alone: no model
    ranking = snapshot.rank(branches, query=request_text, query_vector=None, top_k=3, options=RankingOptions())
    return [snapshot.docs[c.row].tool_id for c in ranking.candidates], branches.sparse


def test_a_quoted_folder_name_no_longer_decides_which_tool_comes_first():
    snapshot = IndexSnapshot(DOCS, None)
    unquoted, plain = ranked(snapshot, "Create a new folder named Q2 Reports inside the Finance folder")
    assert unquoted[0] == "finance::create_report_note"  # "reports", "finance": the rarest words decide
    quoted, sparse = ranked(snapshot, 'Create a new folder named "Q2 Reports" inside the "Finance" folder')
    assert quoted[0] == "files::create_folder"
    # The quoted words still count: at their share of the score, and in full in the coverage (calibration).
    assert 0 < sparse.scores[0] < plain.scores[0]
    assert sparse.scores[1] == pytest.approx(plain.scores[1])
    assert np.array_equal(sparse.coverage, plain.coverage)


def test_a_word_said_outside_quotes_too_counts_in_full():
    snapshot = IndexSnapshot(DOCS, None)
    _, both = ranked(snapshot, 'Create the finance folder "Finance" inside my folder')
    _, plain = ranked(snapshot, "Create the finance folder Finance inside my folder")
    assert np.array_equal(both.scores, plain.scores)
    assert 0 < QUOTED_SHARE < 1
