"""Import a large real OpenAPI document as an OpenAPI server and search it (a benchmark script, not a test).

    .venv/bin/python bench/bench_openapi_import.py PATH/TO/openapi.json [--query "..." --expect tool_name ...]

Uses a throwaway SQLite database (never the configured one). Reports the sync run (tools imported, refused
with their reasons, seconds), the index build time, and for each query the top 5 tools. For GitHub's REST
description: `npm pack @octokit/openapi` and use package/generated/api.github.com.json (13 MB, 1.2k ops).
"""

import argparse
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GITHUB_CHECKS = [
    ("create an issue in a repository", "issues_create"),
    ("list the pull requests of a repository", "pulls_list"),
    ("merge a pull request", "pulls_merge"),
    ("star a repository for the signed-in user", "activity_star-repo-for-authenticated-user"),
    ("delete a branch protection rule", "repos_delete-branch-protection"),
    ("download the logs of a workflow run", "actions_download-workflow-run-logs"),
]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("document", type=Path)
    parser.add_argument("--base-url", default="https://api.github.com")
    args = parser.parse_args()

    database = Path(tempfile.mkdtemp()) / "bench-openapi.sqlite3"
    os.environ["DATABASE_URL"] = f"sqlite:///{database}"
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
    os.environ.setdefault("SECRET_KEY", "bench-only-not-a-secret")  # a throwaway key for this process
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    sys.path.insert(0, str(ROOT))
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)

    from catalog.models import Server, Tool
    from catalog.services.openapi_documents import server_openapi_document_set
    from catalog.services.sync import server_sync
    from search.services import index_rebuild, tool_search

    server = Server.objects.create(slug="github", name="GitHub REST", transport="openapi", base_url=args.base_url)
    server_openapi_document_set(server=server, text=args.document.read_text(encoding="utf-8"))
    started = time.perf_counter()
    run = server_sync(server_pk=server.pk, trigger="bench")
    sync_seconds = time.perf_counter() - started
    print(f"document: {args.document} ({args.document.stat().st_size / 1e6:.1f} MB)")
    print(f"sync: {run.status} in {sync_seconds:.1f}s: {run.added} tools, {run.rejected} refused")
    for reason, count in Counter(r["reason"].split(": ", 1)[-1] for r in run.rejections).most_common(5):
        print(f"  refused x{count}: {reason}")
    if run.error and run.status == "failed":
        print(f"  error: {run.error}")
        return

    started = time.perf_counter()
    index_rebuild()
    print(f"index build: {time.perf_counter() - started:.1f}s")
    visible = list(Tool.objects.live().values_list("pk", flat=True))
    by_pk = dict(Tool.objects.values_list("pk", "name"))
    hits = 0
    for query, expected in GITHUB_CHECKS:
        result = tool_search(query=query, visible=visible, top_k=5, enforce_abstention=False)
        names = [by_pk[match.tool_pk] for match in result.matches]
        rank = names.index(expected) + 1 if expected in names else None
        hits += rank == 1
        print(f"  {query!r}: expected {expected} at rank {rank}; top 5 {names}")
    print(f"hit@1 on {len(GITHUB_CHECKS)} checks: {hits}")


if __name__ == "__main__":
    main()
