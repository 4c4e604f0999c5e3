"""The producer lift of ranking's second stage (ORM-free, no model): in a multi-step request, a tool of a server
that finds an identifier another of its first tools requires (geocoding for a tool that takes coordinates) comes
just below that tool, as the step the request never words; read from visible candidates only."""

import numpy as np
import pytest

from search.documents import render_parameters
from search.engine.dense import DenseScores
from search.engine.producers import needed_identifiers, produced_words
from search.engine.ranking import Branches, RankingOptions, rank
from search.engine.sparse import SparseScores

COORDINATES = {
    "type": "object",
    "properties": {"latitude": {"type": "number"}, "longitude": {"type": "number"}, "radius": {"type": "number"}},
    "required": ["latitude", "longitude"],
}
TOOLS = [  # (name, description, input schema, server, cosine)
    ("find_nearby_places", "Discover places near a location.", COORDINATES, 0, 0.80),
    (
        "geocode_address",
        "Convert an address or place name to its latitude and longitude.",
        {"type": "object", "properties": {"address": {"type": "string"}}, "required": ["address"]},
        0,
        0.40,
    ),
    ("get_weather", "Current weather for a city.", {"type": "object", "properties": {}}, 1, 0.60),
    ("search_news", "Search news articles.", {"type": "object", "properties": {}}, 2, 0.55),
    ("reverse_geocode", "Convert a latitude and longitude to an address.", COORDINATES, 0, 0.50),
]
NAMES = [name for name, *_ in TOOLS]
NEEDS = [needed_identifiers(render_parameters(schema)) for _, _, schema, _, _ in TOOLS]
GIVES = [produced_words(name, description) for name, description, *_ in TOOLS]
SERVERS = np.asarray([server for *_, server, _ in TOOLS])
COSINES = np.asarray([cosine for *_, cosine in TOOLS], np.float32)
TRIP = "find cafes near the Louvre, then check the weather there"


def ranked(query: str, share: float, rows: list[int] | None = None, steps: int = 2, cosines: np.ndarray = COSINES):
    """Rank the tools with ``rows`` visible; ``steps`` > 1: a multi-step request (each part scored alike)."""
    n = len(TOOLS)
    visible = np.zeros(n, bool)
    visible[rows if rows is not None else list(range(n))] = True

    def branches() -> Branches:
        sparse = SparseScores(np.zeros(n), np.zeros(n), ("term",))
        return Branches(sparse, DenseScores(cosines.copy(), cosines.copy(), np.arange(n + 1)), np.flatnonzero(visible))

    options = RankingOptions(intent=False, server_share=0.0, name_share=0.0, cluster_share=0.0, producer_share=share)
    return rank(
        branches(),
        query=query,
        top_k=10,
        options=options,
        tie_keys=np.arange(n),
        servers=SERVERS,
        clauses=[branches() for _ in range(steps)] if steps > 1 else (),
        needs=NEEDS,
        gives=GIVES.__getitem__,
    )


def order(ranking) -> list[str]:
    return [NAMES[c.row] for c in ranking.candidates]


def test_an_identifier_input_is_read_from_the_required_inputs_names():
    assert NEEDS[0] == {"latitude", "longitude"}
    assert NEEDS[1] == frozenset()  # an address is said, not found
    lines = render_parameters(
        {
            "properties": {"paper_id": {"type": "string"}, "query": {"type": "string"}, "objectId": {"type": "string"}},
            "required": ["paper_id", "query"],
        }
    )
    assert needed_identifiers(lines) == {"paper"}  # objectId is optional, query no identifier
    assert needed_identifiers(("context7CompatibleLibraryID (string, required)",)) == {
        "context7",
        "compatible",
        "library",
    }
    assert {"latitude", "longitude", "address"} <= GIVES[1]


def test_the_tool_that_finds_the_identifier_comes_just_below_the_tool_that_needs_it():
    assert order(ranked(TRIP, 0.0)) == [
        "find_nearby_places",
        "get_weather",
        "search_news",
        "reverse_geocode",
        "geocode_address",
    ]
    lifted = ranked(TRIP, 0.3)
    assert order(lifted) == ["find_nearby_places", "geocode_address", "get_weather", "search_news", "reverse_geocode"]
    by_name = {NAMES[c.row]: c for c in lifted.candidates}
    assert by_name["geocode_address"].server_part == pytest.approx(0.3 * by_name["find_nearby_places"].score)
    assert by_name["reverse_geocode"].server_part == 0.0  # it needs the coordinates itself
    for c in lifted.candidates:  # the explanation adds up
        assert c.score == pytest.approx(c.bm25_part + c.dense_part + c.server_part)
    # Never above the tool that needs it, whatever the share.
    assert order(ranked(TRIP, 5.0))[:2] == ["find_nearby_places", "geocode_address"]


def test_no_lift_for_a_one_step_request_or_one_that_gives_the_identifier():
    plain = [(c.row, c.score) for c in ranked(TRIP, 0.0, steps=1).candidates]
    assert [(c.row, c.score) for c in ranked(TRIP, 0.3, steps=1).candidates] == plain
    said = "find cafes near latitude 48.86 and longitude 2.33, then check the weather there"
    assert [(c.row, c.score) for c in ranked(said, 0.3).candidates] == [
        (c.row, c.score) for c in ranked(said, 0.0).candidates
    ]


def test_a_hidden_tool_that_needs_the_identifier_lifts_nothing():
    rows = [1, 2, 3]  # both tools that take coordinates hidden
    plain = [(c.row, c.score, c.server_part) for c in ranked(TRIP, 0.0, rows).candidates]
    assert [(c.row, c.score, c.server_part) for c in ranked(TRIP, 0.3, rows).candidates] == plain
    # ... and made visible, one lifts it: the comparison above would catch a leak.
    shown = {NAMES[c.row]: c for c in ranked(TRIP, 0.3, [1, 2, 3, 4]).candidates}
    assert shown["geocode_address"].server_part > 0


def test_the_cut_does_not_end_the_answer_at_a_lifted_tool_with_little_evidence_of_its_own():
    cosines = COSINES.copy()
    cosines[1] = 0.005  # geocoding's own evidence far below the dynamic cut's floor
    answer = ranked(TRIP, 1.0, cosines=cosines)
    assert order(answer)[:3] == ["find_nearby_places", "geocode_address", "get_weather"]
    assert answer.candidates[1].calibrated < answer.floors[answer.candidates[1].step]
    assert answer.cut == len(TOOLS)  # served, and so is every tool after it
    assert ranked(TRIP, 0.0, cosines=cosines).cut == len(TOOLS) - 1  # unlifted, last and cut
