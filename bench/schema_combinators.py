"""How long checking a caller's arguments against an ``anyOf``/``oneOf`` schema takes (redteam41), and how much memory
it holds: every branch is checked before the call is refused, and jsonschema's own check collected each branch's
errors whole (each quoting the failing value) before yielding one.

    PYTHONPATH=. nice -n 10 .venv/bin/python bench/schema_combinators.py

Runs ``arguments_check`` (the gateway's check, under ``SCOUT_MCP_SCHEMA_CHECK_SECONDS``) in this process, with Django's
settings loaded (set SCOUT_MCP_SCHEMA_CHECK_SECONDS=1000 to see a check's whole cost); prints CPU and wall seconds,
the tracemalloc peak (a second run) and the answer's first words per case.
"""

import os
import time
import tracemalloc

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
os.environ.setdefault("SECRET_KEY", "bench")
os.environ.setdefault("DEBUG", "1")

import django  # noqa: E402

django.setup()

from mcpgateway.services.execution import arguments_check  # noqa: E402

# Arrays of the one shape every branch refuses, about 250 kB of arguments (SCOUT_MCP_MAX_ARGUMENT_BYTES: 256 kB).
NULLS = [None] * 50_000
PAIRS = [[None, None]] * 20_000
BRANCHES = [{"type": "array", "items": {"type": kind}} for kind in ("string", "integer", "boolean", "object")]
CASES = {
    "anyOf of 4 array branches, 50,000 nulls": (
        {"type": "object", "properties": {"x": {"anyOf": BRANCHES}}},
        {"x": NULLS},
    ),
    "oneOf of 4 array branches, 50,000 nulls": (
        {"type": "object", "properties": {"x": {"oneOf": BRANCHES}}},
        {"x": NULLS},
    ),
    "anyOf of 4 array branches, 49,999 strings and a null (one branch read whole)": (
        {"type": "object", "properties": {"x": {"anyOf": BRANCHES}}},
        {"x": [*["a"] * 49_999, None]},
    ),
    "anyOf nested in each item's anyOf, 20,000 pairs": (
        {
            "type": "object",
            "properties": {
                "x": {
                    "anyOf": [
                        {"type": "array", "items": {"anyOf": BRANCHES}},
                        {"type": "array", "items": {"oneOf": BRANCHES}},
                    ]
                }
            },
        },
        {"x": PAIRS},
    ),
}


def main() -> None:
    for name, (schema, arguments) in CASES.items():
        started, wall = time.process_time(), time.monotonic()
        problem = arguments_check(schema, arguments)
        seconds, wall = time.process_time() - started, time.monotonic() - wall
        tracemalloc.start()
        arguments_check(schema, arguments)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        text = problem.text[:60] if problem else "valid"
        print(f"{name}: {seconds:.2f} s CPU, {wall:.2f} s wall, peak {peak / 2**20:.0f} MB: {text}")


if __name__ == "__main__":
    main()
