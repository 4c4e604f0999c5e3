"""Pure checks behind the endpoint: argument validation messages and the JSON body guard."""

from __future__ import annotations

import json

import pytest

from mcpgateway.guards import check_json_body, json_depth
from mcpgateway.services import arguments_problem

SCHEMA = {
    "type": "object",
    "properties": {
        "owner": {"type": "string"},
        "labels": {"type": "array", "items": {"type": "string"}},
        "limit": {"type": "integer", "minimum": 1},
        "mode": {"enum": ["fast", "safe"]},
    },
    "required": ["owner"],
    "additionalProperties": False,
}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({"owner": "a"}, None),
        ({}, "arguments: missing required property owner"),
        ({"owner": 5}, "arguments.owner: must be of type string"),
        ({"owner": "a", "labels": ["x", 3]}, "arguments.labels[1]: must be of type string"),
        ({"owner": "a", "limit": 0}, "arguments.limit: fails minimum 1"),
        ({"owner": "a", "mode": "slow"}, 'arguments.mode: must be one of ["fast","safe"]'),  # compact JSON
        (
            {"owner": "a", "<script>": 1},
            "arguments: has properties the schema does not allow (allowed: labels, limit, mode, owner)",
        ),
        # A misnamed property where others are forbidden: said once, by the rule that forbids it (the missing
        # one's "and has properties the schema does not name" said it a second time, agentux17).
        (
            {"ownr": "a"},
            "arguments: missing required property owner; "
            "arguments: has properties the schema does not allow (allowed: labels, limit, mode, owner)",
        ),
        # Every problem at once (shallowest first), so the model fixes them in one call, not one per call.
        (
            {"owner": 5, "limit": 0, "mode": "slow"},
            'arguments.limit: fails minimum 1; arguments.mode: must be one of ["fast","safe"]; '
            "arguments.owner: must be of type string",
        ),
        (
            {"labels": [1, 2, 3, 4, 5, 6, 7]},
            "arguments: missing required property owner; "
            + "; ".join(f"arguments.labels[{index}]: must be of type string" for index in range(4))
            + "; and 3 more",
        ),
    ],
)
def test_arguments_problem_names_the_path_and_never_the_value(arguments, expected):
    assert arguments_problem(SCHEMA, arguments) == expected


OPEN = {"type": "object", "properties": {"timezone": {"type": "string"}, "format": {}}, "required": ["timezone"]}


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "arguments: missing required property timezone"),
        ({"format": "x"}, "arguments: missing required property timezone"),
        (
            {"tz": "Asia/Tokyo"},
            "arguments: missing required property timezone, and has properties the schema does not name "
            "(its properties: timezone, format)",
        ),
    ],
)
def test_a_missing_property_says_when_others_the_schema_does_not_name_were_sent(arguments, expected):
    """A schema that allows other properties accepts a misnamed one silently: the missing one's message says
    that some sent names are not the schema's, without repeating them."""
    assert arguments_problem(OPEN, arguments) == expected


def test_a_broken_schema_is_reported_not_raised():
    assert "cannot be used" in arguments_problem({"type": "nonsense-type"}, {})


@pytest.mark.parametrize(
    ("body", "code"),
    [
        (b'{"a": 1', -32700),
        (b"\xef\xbb\xbf{}", -32700),
        (b'{"name": "a", "name": "b"}', -32700),
        (b"[]", -32600),
        (b"[" * 100 + b"]" * 100, -32700),
        (b'{"id": "calc::add\\ud800"}', -32700),  # a lone surrogate, escaped
        (b'{"id": "\\uDFFFcalc::add"}', -32700),
        (b'{"id": "calc::add\xed\xa0\x80"}', -32700),  # its bytes sent raw (json.loads passes them)
    ],
)
def test_check_json_body_rejects(body, code):
    problem = check_json_body(body, max_depth=64)
    assert problem is not None and problem[1] == code


def test_check_json_body_accepts_ordinary_requests_and_brackets_inside_strings():
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"q": "[[[[{{{{" * 100}}).encode()
    assert check_json_body(body, max_depth=64) is None
    # A surrogate pair is one character (an emoji); an escaped backslash before "ud800" is text.
    for text in (b'"\\ud83d\\ude00 time"', b'"\\\\ud800"', '"\U0001f600"'.encode()):
        assert check_json_body(b'{"q": ' + text + b"}", max_depth=64) is None
    assert json_depth(body) == 2


@pytest.mark.parametrize("strings", [0, 200])
def test_the_depth_limit_is_exact_however_many_brackets_sit_in_strings(strings):
    def nested(depth: int) -> bytes:
        inner = json.dumps({"q": "[{" * strings})
        return ('{"a": ' * (depth - 1) + inner + "}" * (depth - 1)).encode()  # an object: a list is a batch

    assert check_json_body(nested(64), max_depth=64) is None
    problem = check_json_body(nested(65), max_depth=64)
    assert problem is not None and "nested deeper than 64" in problem[2]


def test_depth_check_survives_hostile_nesting():
    body = b"[" * 500_000 + b"]" * 500_000
    assert json_depth(body) == 500_000  # counted without recursion: no RecursionError


# --- regular expressions run on RE2 (issue 12, item 1) ---------------------------------------------------

KEYED = {
    "type": "object",
    "patternProperties": {"^(a+)+$": {"type": "integer"}},
    "additionalProperties": False,
}


@pytest.mark.timeout(60)  # Python's re would need minutes for this key (2**32 steps); RE2 needs 33
def test_property_names_are_matched_without_backtracking():
    assert arguments_problem(KEYED, {"aaa": 1}) is None
    assert arguments_problem(KEYED, {"aaa": "x"}) == "arguments.aaa: must be of type integer"
    assert arguments_problem(KEYED, {"a" * 32 + "!": 1}) == (
        "arguments: has properties the schema does not allow (allowed: none)"
    )


def test_unevaluated_properties_next_to_pattern_properties_is_refused_not_run_on_re():
    schema = {"type": "object", "patternProperties": {"^x": {}}, "unevaluatedProperties": False}
    assert "cannot check safely" in arguments_problem(schema, {"x1": 1})
    assert arguments_problem({"type": "object", "unevaluatedProperties": False}, {"y": 1}) is not None
