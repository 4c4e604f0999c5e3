"""The explanation lines tool_search serves a model, from the ranking's why_matched."""

from mcpgateway.services.discovery import _why_lines


def test_a_demoted_tool_says_so_and_a_learned_match_names_the_tools_own_closest_text():
    why = {"fields": {"name": ["time"]}, "closest": "learned", "demoted": "close to a negative example"}
    assert _why_lines({**why, "own": {"closest": "document"}}) == [
        "time — in name",
        "meaning close to its definition",
        "close to a negative example",
    ]
    own_example = {"closest": "example", "example_request": "what time is it"}
    assert _why_lines({"closest": "learned", "own": own_example}) == _why_lines(own_example)
    assert _why_lines({"closest": "learned"}) == ["closest in meaning"]


def test_an_example_request_is_quoted_and_nothing_matched_says_meaning():
    assert _why_lines({"closest": "example", "example_request": "what time is it"}) == [
        "close to the example request 'what time is it'"
    ]
    assert _why_lines({}) == ["closest in meaning"]


def test_words_matched_in_several_fields_are_said_once_with_the_fields_grouped():
    # The tryout's answer read "name: time; server: time; server description: time; description: time".
    fields = {
        "name": ["time", "current"],
        "server": ["time"],
        "server description": ["time"],
        "description": ["current", "time"],
        "parameters": ["timezone"],
    }
    assert _why_lines({"fields": fields, "closest": "description"}) == [
        "time — in name, server, description; current — in name, description; timezone — in parameters",
        "meaning close to its description",
    ]
    assert _why_lines({"fields": {"name": ["time"], "server": ["time"], "description": ["time"]}}) == [
        "time — in name, server, description"
    ]


def test_function_words_are_never_given_as_a_reason():
    # A Spanish request matched "de" and "las" in a tool's parameters: the line read "de, las — in parameters".
    assert _why_lines({"fields": {"parameters": ["de", "las"]}, "closest": "summary"}) == [
        "meaning close to its summary"
    ]
    fields = {"name": ["list", "files", "all"], "parameters": ["all", "folder"]}
    assert _why_lines({"fields": fields}) == ["list, files — in name; folder — in parameters"]


def test_the_closest_text_is_named_as_a_reader_knows_it():
    # The demo's answers read "meaning close to its document": the index's name for the tool's whole text.
    assert _why_lines({"closest": "document"}) == ["meaning close to its definition"]
    assert _why_lines({"closest": "passage"}) == ["meaning close to a passage of its description"]
    assert _why_lines({"closest": "summary"}) == ["meaning close to its summary"]
