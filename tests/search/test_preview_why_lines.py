"""The curator preview's "Why it matched" names each reason once: it listed "example request: …" twice for one tool,
the example's words and then its text (adminux32, adminux33)."""

from search.backends.base import Match
from search.preview import why_lines


def _match(why: dict) -> Match:
    return Match(tool_pk=1, tool_id="git::git_log", name="git_log", server="git", title="", summary="", score=0.9,
                 fused_rank=1, bm25_rank=1, dense_rank=1, why_matched=why)  # fmt: skip


def _example_lines(why: dict) -> list[str]:
    return [line for line in why_lines(_match(why)) if "example request" in line]


def test_the_closest_example_request_and_its_words_are_one_line():
    why = {"fields": {"name": ["log"], "example request": ["latest", "commits"]}, "closest": "example",
           "example_request": "show me the latest commits"}  # fmt: skip
    assert _example_lines(why) == [
        "example request “show me the latest commits”: closest in meaning, words latest, commits"
    ]
    assert "name: log" in why_lines(_match(why)) and not any(
        line.startswith("closest vector") for line in why_lines(_match(why))
    )


def test_words_only_another_example_request_holds_say_two_matched():
    why = {"fields": {"example request": ["latest", "branch"]}, "closest": "example",
           "example_request": "show me the latest commits"}  # fmt: skip
    assert _example_lines(why) == [
        "2 example requests: “show me the latest commits” closest in meaning; another has the word branch"
    ]


def test_example_words_without_a_close_example_stay_a_words_line():
    why = {"fields": {"example request": ["latest", "commits"]}, "closest": "description"}
    assert why_lines(_match(why)) == ["example request: latest, commits", "closest vector: description"]
