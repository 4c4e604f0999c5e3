"""The explanation lines tool_search serves a model, from the ranking's why_matched."""

from mcpgateway.services.discovery import _why_lines


def test_a_demoted_tool_says_so_and_a_learned_match_names_the_tools_own_closest_text():
    why = {"fields": {"name": ["time"]}, "closest": "learned", "demoted": "close to a negative example"}
    assert _why_lines({**why, "own": {"closest": "document"}}) == ["words: time", "close to a negative example"]
    own_example = {"closest": "example", "example_request": "what time is it"}
    assert _why_lines({"closest": "learned", "own": own_example}) == _why_lines(own_example)
    assert _why_lines({"closest": "learned"}) == ["close in meaning"]
    assert not any("led to this tool" in line for line in _why_lines({**why, "own": own_example}))


def test_an_example_request_is_quoted_and_nothing_matched_says_meaning():
    assert _why_lines({"closest": "example", "example_request": "what time is it"}) == [
        "like the example request 'what time is it'"
    ]
    assert _why_lines({}) == ["close in meaning"]


def test_words_are_said_once_without_the_fields_they_were_found_in():
    # The demo's answers spent ~17 tokens a match on "show — in purpose, example request; commits — in purpose,
    # parameters, example request; ...": a model sees the name, summary and schema the fields are.
    fields = {
        "name": ["time", "current"],
        "server": ["time"],
        "server description": ["time"],
        "description": ["current", "time"],
        "parameters": ["timezone"],
    }
    assert _why_lines({"fields": fields, "closest": "description"}) == ["words: time, current, timezone"]


def test_words_of_the_quoted_example_request_are_not_said_twice():
    why = {
        "fields": {"purpose": ["show", "commits"], "parameters": ["commits", "repository"]},
        "closest": "example",
        "example_request": "show me the latest commits",
    }
    assert _why_lines(why) == ["words: repository", "like the example request 'show me the latest commits'"]
    why["fields"] = {"purpose": ["show", "commits"]}
    assert _why_lines(why) == ["like the example request 'show me the latest commits'"]


def test_function_words_are_never_given_as_a_reason():
    # A Spanish request matched "de" and "las" in a tool's parameters: the line read "de, las — in parameters".
    assert _why_lines({"fields": {"parameters": ["de", "las"]}, "closest": "summary"}) == ["close in meaning"]
    fields = {"name": ["list", "files", "all"], "parameters": ["all", "folder"]}
    assert _why_lines({"fields": fields}) == ["words: list, files, folder"]


def test_closeness_in_meaning_is_said_only_when_nothing_else_is():
    # Every match of an answer is close in meaning: "meaning close to its summary" beside its words told nothing.
    assert _why_lines({"closest": "document"}) == ["close in meaning"]
    assert _why_lines({"fields": {"name": ["diff"]}, "closest": "summary"}) == ["words: diff"]
