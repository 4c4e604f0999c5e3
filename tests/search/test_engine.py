"""ORM-free pieces: tokenizer, documents, sparse statistics, request parts, operation intent."""

import numpy as np

from search.documents import ToolDoc, description_passages, render_parameters, tool_doc_from_record
from search.engine.decompose import request_parts
from search.engine.intent import CREATE, DELETE, READ, request_operations, tool_operation
from search.engine.ranking import Candidate, Confidence, RankingOptions, _cut
from search.engine.sparse import K1, B, SparseIndex, _idf, weighted_tokens
from search.indexes import ToolSearchIndex
from search.text import request_terms, request_terms_kept, split_identifier, tokenize


def test_identifiers_are_split_and_kept_whole():
    assert split_identifier("createPullRequest") == "create pull request"
    assert split_identifier("get_HTTP-response") == "get http response"
    assert tokenize("list_files in GitHub") == ["list_files", "list", "files", "github", "git", "hub"]


def test_parameters_render_type_requirement_and_enum():
    schema = {
        "type": "object",
        "properties": {"state": {"type": "string", "description": "Issue state", "enum": ["open", "closed"]}},
        "required": ["state"],
    }
    assert render_parameters(schema) == ("state (string, required): Issue state [enum open, closed]",)
    assert render_parameters("not a schema") == ()


def test_document_fields_follow_the_declaration_and_hash_tracks_texts():
    doc = ToolDoc(pk=1, tool_id="s::get_issue", name="get_issue", server="s", description="Get an issue.")
    assert set(doc.field_texts()) == {f.name for f in ToolSearchIndex.fields}
    assert doc.summary_text() == "get issue (s): Get an issue."
    changed = ToolDoc(pk=1, tool_id="s::get_issue", name="get_issue", server="s", description="Get a bug.")
    assert doc.dense_hash() != changed.dense_hash()
    long = "First sentence here.\n" + "\n".join(f"- usage line number {i} with enough words" for i in range(12))
    assert len(description_passages(long)) == 8 and description_passages("short") == []


class _CountedLines(str):
    """A description that counts the lines read of it."""

    read = 0

    def splitlines(self, keepends=False):
        for line in super().splitlines(keepends):
            type(self).read += 1
            yield line


def test_a_description_of_thousands_of_lines_is_read_only_until_its_passages_are_found():
    """T13: an upstream's description may hold thousands of lines (256 kB: 7,500), and each was compared with every
    passage kept before it: 1.5 s per call, several per index build of the tool. The first eight are what is kept."""
    _CountedLines.read = 0
    lines = [f"- usage line number {i:05d} with enough words" for i in range(7_500)]
    description = _CountedLines("First sentence here.\n" + "\n".join(lines))
    passages = description_passages(description)
    assert passages == [line.strip(" -") for line in lines[:8]]
    assert _CountedLines.read <= 10  # the first sentence, the eight passages, and no further: all 7,501 before


def test_bm25_statistics_come_from_visible_rows_only():
    weights = {"name": 3, "description": 1}
    docs = [
        weighted_tokens({"name": "alpha", "description": "send mail"}, weights),
        weighted_tokens({"name": "beta", "description": "send mail now"}, weights),
        weighted_tokens({"name": "gamma", "description": "mail mail mail mail"}, weights),
    ]
    full = SparseIndex(docs)
    alone = SparseIndex(docs[:2])
    visible = np.array([True, True, False])
    a = full.score("send mail", visible)
    b = alone.score("send mail", np.array([True, True]))
    assert np.allclose(a.scores[:2], b.scores) and a.scores[2] == 0
    assert np.allclose(a.coverage[:2], b.coverage)


def test_multi_step_requests_are_split_into_parts():
    assert request_parts("Get the weather in Oslo. Then book a table; finally send an invite") == [
        "Get the weather in Oslo",
        "book a table",
        "send an invite",
    ]
    assert request_parts("read and write the file") == []
    assert request_parts("On Semgrep, scan main.py for issues") == []


def test_remembering_is_a_step_and_an_operation_of_its_own():
    """ "... and remember that ..." starts a step (the memory tool of it was missing from the first five), and
    remembering asks for a write, so a tool that stores is preferred to one that looks up (bench/NOTES-agentux14.md)."""
    assert request_parts("show the latest commits and remember that Bob reviewed them") == [
        "show the latest commits",
        "remember that Bob reviewed them",
    ]
    assert request_operations("remember that Bob likes coffee") == {CREATE}
    assert request_operations("what do you remember about Bob") == {READ, CREATE}


def _candidates(*scored: tuple[float, int]) -> list[Candidate]:
    """Candidates in rank order from (calibrated score, step) pairs; the rank score follows the order."""
    return [
        Candidate(row=i, score=1.0 - i / 100, calibrated=cal, bm25_rank=None, dense_rank=None, step=step)
        for i, (cal, step) in enumerate(scored)
    ]


def test_the_dynamic_cut_judges_each_tool_against_the_best_of_its_own_step():
    options = RankingOptions(cut_drop=0.5, cut_keep=1)
    # Step 1 (the whole request's words fit its tools) is strong; step 2's best tool is weak but is its
    # step's best: kept, as is a step-2 tool within the drop of it. The next one is far below both steps.
    multi = _candidates((0.95, 1), (0.9, 1), (0.3, 2), (0.2, 2), (0.9, 1), (0.05, 1), (0.25, 2))
    ranking = _cut(multi, 10, options, (), peak=0.3)
    assert ranking.confidence is Confidence.HIGH
    assert ranking.cut == 5  # the step-1 tool at 0.05 is 0.9 below its step's best: the answer ends there
    # The same scores as one step: the weak tools are cut where they fall below the best overall.
    single = _candidates(*[(cal, 0) for cal, _ in [(0.95, 1), (0.9, 1), (0.3, 2), (0.2, 2), (0.9, 1)]])
    assert _cut(single, 10, options, (), peak=0.3).cut == 2
    assert _cut(multi, 10, RankingOptions(cut_drop=0.5, cut_keep=1, dynamic_cut=False), (), peak=0.3).cut == 7
    assert _cut(multi, 3, options, (), peak=0.3).cut == 3  # top_k still bounds the answer


def test_operation_intent():
    assert request_operations("please delete the old branch") == {DELETE}
    assert request_operations("open a ticket") == {CREATE, READ}
    assert tool_operation("createIssue", "") == {CREATE}
    assert tool_operation("issue_tool", "Fetch an issue by id") == {READ}


def test_a_tool_governance_classes_as_a_read_reads_whatever_its_name_says():
    """git_log ("Shows the commit logs", readOnlyHint) read as a write from "log" ("log my hours"): a read request
    cost it the conflict. Governance's read class (``ToolDoc.read_only``) adds the read; it takes nothing away."""
    assert tool_operation("git_log", "Shows the commit logs") == {CREATE}
    assert tool_operation("git_log", "Shows the commit logs", read_only=True) == {CREATE, READ}
    assert tool_operation("git_branch", "Lists Git branches", read_only=True) == {READ}
    assert tool_operation("delete_rows", "", read_only=True) == {DELETE, READ}  # never a delete the less


def test_an_eval_records_read_class_is_governances_from_its_annotations():
    """``tool_doc_from_record``: the class ``classification_derive`` gives a synced tool no admin classified. A
    readOnlyHint the tool's own name contradicts is no read."""
    hint = {"annotations": {"readOnlyHint": True}}
    assert tool_doc_from_record(1, {"id": "s::git_log", "name": "git_log", **hint}, {}).read_only
    assert not tool_doc_from_record(1, {"id": "s::delete_entities", "name": "delete_entities", **hint}, {}).read_only
    assert not tool_doc_from_record(1, {"id": "s::git_log", "name": "git_log"}, {}).read_only  # no hint: a write


def test_a_tools_operation_comes_from_the_first_eight_words_of_its_description_only():
    """A verb deep in a description (a side remark) does not make the tool an operation of that kind."""
    words = "alpha bravo charlie golf hotel india juliet"  # seven words, none a verb
    assert tool_operation("station_data", f"{words} delete rows") == {DELETE}  # the eighth word
    assert tool_operation("station_data", f"{words} kilo delete rows") == frozenset()  # the ninth


def test_an_untaught_tools_vector_hash_is_the_one_stored_before_learned_centroids():
    """Upgrading must not make every stored vector stale: a tool with no learned centroid hashes exactly as it
    did before centroids existed (the literal is that version's hash of this document), so its vectors are
    reused; a centroid's weight does change the hash (its vector must be rebuilt)."""

    def issue_doc(**extra) -> ToolDoc:
        return ToolDoc(pk=1, tool_id="s::get_issue", name="get_issue", server="s", description="Get an issue.", **extra)

    untaught = issue_doc(examples=("find my bug",), negatives=("delete it",))
    assert untaught.dense_hash() == "384b2348a4dc15086f10a26f2b398f8160dc78bf6c2a5b400a54d9c31378b181"
    taught = (("open bugs", 0.6), ("my bugs", 0.6))
    assert (
        issue_doc(learned=taught, learned_centroid=0.6).dense_hash()
        != issue_doc(learned=taught, learned_centroid=0.7).dense_hash()
    )


def test_request_terms_are_the_tokens_of_the_request_in_order_however_often_asked():
    texts = ["Please list the open GitHub pull-requests", "createPullRequest, then notify the team", "a", "x_y x_y"]
    with request_terms_kept():
        for _ in range(2):  # the second time from the kept answers
            assert [request_terms(text) for text in texts] == [tuple(tokenize(text)) for text in texts]
        assert request_terms(texts[0]) is request_terms(texts[0])  # tokenized once within one request


def test_explain_names_each_matched_word_once_per_field_label_in_the_fields_order():
    from search.engine.snapshot import IndexSnapshot

    doc = ToolDoc(
        pk=1,
        tool_id="mail::list_inbox",
        name="list_inbox",
        server="mail",
        description="List the messages of the inbox, newest first.",
    )
    why = IndexSnapshot([doc], None).explain(0, -1, ["inbox", "messages", "list", "absent"])
    # name ("list_inbox" whole, then "list", "inbox") and name_split share the label "name": each word once
    assert why["fields"] == {"name": ["list", "inbox"], "description": ["list", "messages", "inbox"]}
    assert why["terms"] == ["inbox", "messages", "list"]


def test_explain_skips_tokenizing_a_field_only_when_it_holds_no_wanted_word():
    """``_hits`` (the fields an answer explains) equals filtering the field's tokens, including words found only
    once tokenized: compounds joined with ``_`` from a hyphen, camelCase parts, upper case; non-ASCII texts are
    always tokenized."""
    from search.engine.snapshot import _hit_form, _hits

    texts = [
        "Use list-files to read a repo",
        "createPullRequest (GitHub)",
        "SEND_EMAIL now; the Inbox v2",
        "Ⅻ ﬁle café list-files",  # NFKC changes these: never skipped
        "nothing here",
        "",
    ]
    wanted_sets = [
        {"list_files", "pull"},
        {"create", "github", "hub"},
        {"send_email", "inbox", "v2"},
        {"file", "cafe", "xii"},
        {"absent", "here"},
        set(),
    ]
    for text in texts:
        for wanted in wanted_sets:
            plain = list(dict.fromkeys(t for t in tokenize(text) if t in wanted))
            assert _hits(text, wanted, _hit_form(text)) == plain, (text, wanted)
    text = "Use list-files to read a repo"
    assert _hits(text, {"list_files"}, _hit_form(text)) == ["list_files"]


def test_bm25_with_every_row_visible_equals_the_masked_scores_bit_for_bit():
    """Every row visible skips the mask (engine/sparse.py): the scores and coverage are exactly those of the
    masked path over an index holding one more, hidden, row."""
    weights = {"name": 3, "description": 1}
    docs = [
        weighted_tokens({"name": f"tool{i}", "description": f"send mail {'now ' * (i % 3)}to team {i % 4}"}, weights)
        for i in range(40)
    ]
    hidden = weighted_tokens({"name": "extra", "description": "send send mail"}, weights)
    with_hidden = SparseIndex([*docs, hidden]).score("send mail to team 2", np.arange(41) < 40)
    everyone = SparseIndex(docs).score("send mail to team 2", np.ones(40, bool))
    np.testing.assert_array_equal(everyone.scores, with_hidden.scores[:40])
    np.testing.assert_array_equal(everyone.coverage, with_hidden.coverage[:40])
    assert everyone.scores.min() > 0


def test_bm25_of_a_request_and_its_parts_at_once_equals_each_alone_bit_for_bit():
    """``score_many`` weighs a word the request and its parts share once: each text's scores, coverage and
    terms are exactly those of scoring it alone, with every row visible or some hidden."""
    weights = {"name": 3, "description": 1}
    docs = [
        weighted_tokens(
            {
                "name": f"tool{i}",
                "description": f"send mail {'now ' * (i % 3)}to team {i % 4}, then file report {i % 5}",
            },
            weights,
        )
        for i in range(60)
    ]
    index = SparseIndex(docs)
    texts = ["send mail to team 2 then file the report", "send mail to team 2", "file the report", "unknown words"]
    for visible in (np.ones(60, bool), np.arange(60) % 3 != 0):
        together = index.score_many(texts, visible)
        for text, found in zip(texts, together, strict=True):
            alone = index.score_many([text], visible)[0]
            np.testing.assert_array_equal(found.scores, alone.scores)
            np.testing.assert_array_equal(found.coverage, alone.coverage)
            assert found.query_terms == alone.query_terms
        assert together[1].scores.max() > 0 and together[2].scores.max() > 0


def plain_bm25(index: SparseIndex, text: str, visible: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lucene BM25 and coverage of ``text`` term by term, each term's rows gathered and scattered back: what
    ``score_many`` computed before its per-row length norms were kept and its sums made with ``np.add.at``."""
    n_visible = int(visible.sum())
    avg_len = float(index.lengths[visible].sum()) / n_visible or 1.0
    scores, matched = np.zeros(len(index), np.float32), np.zeros(len(index), np.float32)
    total = 0.0
    for term in dict.fromkeys(request_terms(text)):
        col = index.vocab.get(term)
        rows = index.tf.indices[index.tf.indptr[col] : index.tf.indptr[col + 1]] if col is not None else []
        tf = index.tf.data[index.tf.indptr[col] : index.tf.indptr[col + 1]] if col is not None else []
        keep = visible[rows] if len(rows) else np.zeros(0, bool)
        rows, tf = np.asarray(rows)[keep], np.asarray(tf)[keep]
        idf = _idf(len(rows), n_visible)
        total += idf
        if len(rows):
            norm = K1 * (1 - B + B * index.lengths[rows] / avg_len)
            scores[rows] += idf * tf * (K1 + 1) / (tf + norm)
            matched[rows] += idf
    return scores, (matched / total if total > 0 else matched)


def test_bm25_equals_the_plain_formula_term_by_term_bit_for_bit():
    """Kept per-row length norms (one set per visible set's average length, more visible sets than it keeps) and
    ``np.add.at`` sums give exactly the scores and coverage of the formula applied term by term."""
    rng = np.random.default_rng(8)
    words = ["send", "mail", "team", "file", "report", "invoice", "calendar", "event", "search", "paper", "issue"]
    weights = {"name": 3, "description": 1}
    docs = [
        weighted_tokens(
            {
                "name": f"{rng.choice(words)}_{rng.choice(words)}",
                "description": " ".join(rng.choice(words, rng.integers(1, 30))),
            },
            weights,
        )
        for _ in range(300)
    ]
    index = SparseIndex(docs)
    texts = ["send the report to the team", "search papers about calendar events", "file an invoice issue", "zzz"]
    masks = [np.ones(300, bool)] + [rng.random(300) < share for share in (0.2, 0.5, 0.7, 0.9, 0.95)]
    for mask in masks + masks:  # twice: the norms kept for an average length, and those made again
        for text, found in zip(texts, index.score_many(texts, mask), strict=True):
            scores, coverage = plain_bm25(index, text, mask)
            np.testing.assert_array_equal(found.scores, scores)
            np.testing.assert_array_equal(found.coverage, coverage)
        assert found.scores.max() == 0 and index.score_many(texts[:1], mask)[0].scores.max() > 0
