"""Split a multi-step request into its parts, so each step's tool can be found on its own.

A long request ("find the trending repos, then summarize them in a Word document and email it") names
several tools; one query vector averages them and BM25 favours the step with the rarest words. Each part
is also scored, and a tool keeps its best score (see ``ranking.rank``).
"""

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import re2

from ..text import request_terms
from .intent import VERBS

MAX_PARTS = 6
MIN_PART_TERMS = 2
_SPLIT = re.compile(
    r"(?<=[.!?;。！？；])\s+|\n+|[;；]|\s*,?\s*\b(?:and then|then|after that|afterwards|finally|next|also)\b\s*"
    r"|\s*,\s*and\s+|，"
    # "... and email it": an "and" followed by an operation verb starts a new step.
    r"|\s+and\s+(?=(?:" + "|".join(sorted(VERBS, key=len, reverse=True)) + r")\b)",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Part:
    """One step of a request: its text and the character spans of the request it was cut from (a step too
    short to stand alone is joined to its neighbour, so a part can have several spans)."""

    text: str
    spans: tuple[tuple[int, int], ...]


_STRIP = " ,.;"


def _pieces(query: str) -> list[tuple[int, int]]:
    """The spans between the split points, each stripped of the spaces and punctuation at its ends."""
    bounds, start = [], 0
    for match in _SPLIT.finditer(query):
        bounds.append((start, match.start()))
        start = match.end()
    bounds.append((start, len(query)))
    pieces = []
    for start, end in bounds:
        piece = query[start:end]
        left = len(piece) - len(piece.lstrip(_STRIP))
        right = len(piece) - len(piece.rstrip(_STRIP))
        if left < len(piece):
            pieces.append((start + left, end - right))
    return pieces


def request_part_spans(query: str) -> list[Part]:
    """The request's parts with their spans in ``query``, or [] when it is a single step."""
    parts: list[Part] = []
    for start, end in _pieces(query):
        piece = query[start:end]
        if parts and len(request_terms(piece)) < MIN_PART_TERMS:
            # too short to stand alone: belongs to the previous step
            parts[-1] = Part(f"{parts[-1].text} {piece}", (*parts[-1].spans, (start, end)))
        else:
            parts.append(Part(piece, ((start, end),)))
    if parts and len(request_terms(parts[0].text)) < MIN_PART_TERMS and len(parts) > 1:
        parts[1] = Part(f"{parts[0].text} {parts[1].text}", parts[0].spans + parts[1].spans)
        parts = parts[1:]
    return parts[:MAX_PARTS] if len(parts) > 1 else []


def request_parts(query: str) -> list[str]:
    """The request's parts, or [] when it is a single step."""
    return [part.text for part in request_part_spans(query)]


# A request that names a text file as where its result goes ("... and save it to /root/markdown/report.md",
# "generate a markdown document in ./out/notes.txt") implies a step it never words: writing that file. The step's
# text is a plain request for it, ranked as a part of its own (``with_implied_steps``). Only text files: a
# ".pptx", ".docx" or ".png" destination is written by its own application's tool, which the request's words
# already find (a file-write step there pushed out the presentation's own tools).
# On RE2, in time linear in the request (Python's backtracking took 64 ms on 4,096 characters of "save save ...").
_DESTINATION = re2.compile(
    r"(?i)\b(?:save|saved|saving|write|writing|generate|create|output|store|export|draft|put)\b[^.?!]*?"
    r"\b(?:to|in|at|as|into)\s+[`'\"]?(?:/|\./|~/)[\pL\pN_./-]*\.([\pL\pN_]{1,5})\b"
)
TEXT_FILE_EXTENSIONS = frozenset(
    {"md", "txt", "html", "htm", "py", "js", "ts", "csv", "json", "yaml", "yml", "xml", "sh", "tex", "bib", "log"}
)
WRITE_STEP = "write the content to a file"


def is_implied(step: str) -> bool:
    """Whether ``step`` is one ``implied_steps`` returns (ranked at ``RankingOptions.implied_share``)."""
    return step == WRITE_STEP


def implied_steps(query: str) -> list[str]:
    """The steps ``query`` implies without wording them: a file write when it names a text file to save to."""
    match = _DESTINATION.search(query)
    return [WRITE_STEP] if match and match.group(1).lower() in TEXT_FILE_EXTENSIONS else []


Parts = list[tuple[str, np.ndarray | None]]


def with_implied_steps(
    query: str, vector: np.ndarray | None, parts: Parts, encode: Callable[[list[str]], Sequence[np.ndarray]]
) -> Parts:
    """``parts`` (the request's steps with their vectors) and the steps it implies (``implied_steps``, encoded by
    ``encode``), the whole request as its first step when it had no parts. Unchanged without a request vector (the
    model is down: BM25 alone reads the request's own words) or with no implied step."""
    steps = implied_steps(query)
    if not steps or vector is None:
        return parts
    return [*(parts or [(query, vector)]), *zip(steps, encode(steps), strict=True)]
