"""Where one tool_search's time goes, in process: token check + gateway_search under cProfile.

    .venv/bin/python bench/profile_gateway_search.py [--tools 10000] [--queries 60] [--db PATH]

Uses the database bench_mcp_http.py prepares (run it with --prepare-only first). Prints the mean time of
each stage of the request path (token verification, visibility, encode, ranking, formatting, query log,
audit) and cProfile's top functions by cumulative time.
"""

import argparse
import cProfile
import pstats
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_mcp_http as bench  # noqa: E402

STAGES = {
    "token verify": ("governance.services.tokens", "api_token_verify"),
    "visibility": ("search.services", "tool_pks_visible_to"),
    "encode": ("search.services", "_encode_query"),
    "rank (backend.search)": ("search.backends.embedded", "EmbeddedBackend.search"),
    "query log": ("search.usage", "query_log_record"),
    "audit": ("governance.services.audit", "audit_record"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tools", type=int, default=10_000)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--db", type=Path)
    parser.add_argument("--top", type=int, default=30)
    args = parser.parse_args()
    db = args.db or bench.ROOT / "var" / f"bench-mcp-{args.tools}.sqlite3"
    bench._setup(db)
    import importlib

    from django.conf import settings

    settings.SCOUT_SEARCH_QUERY_CACHE_SIZE = 0  # every request pays the model, as distinct requests do
    from governance.services.tokens import api_token_verify
    from mcpgateway.services.discovery import gateway_search

    token = bench.bench_user()
    queries, _ = bench.bench_queries(args.queries + 10)
    stage_ms: dict[str, list[float]] = {name: [] for name in STAGES}
    for name, (module_name, attribute) in STAGES.items():  # wrap each stage with a timer
        module = importlib.import_module(module_name)
        owner, _, leaf = attribute.rpartition(".")
        holder = getattr(module, owner) if owner else module
        original = getattr(holder, leaf)

        def timed(*a, __original=original, __name=name, **kw):
            started = time.perf_counter()
            try:
                return __original(*a, **kw)
            finally:
                stage_ms[__name].append((time.perf_counter() - started) * 1000)

        setattr(holder, leaf, timed)
        for loaded in list(sys.modules.values()):  # names imported with "from x import y"
            if loaded is not None and getattr(loaded, "__name__", "").startswith(
                ("search", "mcpgateway", "governance")
            ):
                if getattr(loaded, leaf, None) is original and not owner:
                    setattr(loaded, leaf, timed)
    for query in queries[:10]:  # warm: model, snapshot, caches
        gateway_search(principal=api_token_verify(token), query=query, top_k=5)
    for values in stage_ms.values():
        values.clear()
    profile = cProfile.Profile()
    started = time.perf_counter()
    profile.enable()
    for query in queries[10:]:
        gateway_search(principal=api_token_verify(token), query=query, top_k=5)
    profile.disable()
    total = (time.perf_counter() - started) * 1000 / len(queries[10:])
    print(f"\nmean per request (token verify + gateway_search), in process: {total:.1f} ms (under cProfile)")
    for name, values in stage_ms.items():
        if values:
            print(f"  {name:<24} {sum(values) / len(queries[10:]):7.2f} ms/request  ({len(values)} calls)")
    pstats.Stats(profile).sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
