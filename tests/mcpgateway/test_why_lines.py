"""The explanation lines tool_search serves a model, from the ranking's why_matched."""

from mcpgateway.services.discovery import _why_lines


def test_a_demoted_tool_says_so_and_a_learned_match_never_quotes_the_request():
    lines = _why_lines({"fields": {"name": ["time"]}, "closest": "learned", "demoted": "close to a negative example"})
    assert lines == ["matched name: time", "matches requests that led to this tool", "close to a negative example"]


def test_an_example_request_is_quoted_and_nothing_matched_says_meaning():
    assert _why_lines({"closest": "example", "example_request": "what time is it"}) == [
        "close to the example request 'what time is it'"
    ]
    assert _why_lines({}) == ["closest in meaning"]
