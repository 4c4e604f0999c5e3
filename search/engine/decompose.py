"""Split a multi-step request into its parts, so each step's tool can be found on its own.

A long request ("find the trending repos, then summarize them in a Word document and email it") names
several tools; one query vector averages them and BM25 favours the step with the rarest words. Each part
is also scored, and a tool keeps its best score (see ``ranking.rank``).
"""

import re

from ..text import tokenize
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


def request_parts(query: str) -> list[str]:
    """The request's parts, or [] when it is a single step."""
    parts: list[str] = []
    for piece in _SPLIT.split(query):
        piece = (piece or "").strip(" ,.;")
        if not piece:
            continue
        if parts and len(tokenize(piece)) < MIN_PART_TERMS:
            parts[-1] = f"{parts[-1]} {piece}"  # too short to stand alone: belongs to the previous step
        else:
            parts.append(piece)
    if parts and len(tokenize(parts[0])) < MIN_PART_TERMS and len(parts) > 1:
        parts[1] = f"{parts[0]} {parts[1]}"
        parts = parts[1:]
    return parts[:MAX_PARTS] if len(parts) > 1 else []
