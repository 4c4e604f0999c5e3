"""What confidence the demo's answers carry: labelled agent requests, searched in-process over one demo database
(every tool visible), each with its first tool, its confidence and whether that first tool is the one wanted
(bench/NOTES-agentux24.md).

In-process on one database, so two code versions compare on the same synced and curated tools (a sweep through
MCP against two ``make demo`` set-ups also differs by the set-ups, bench/NOTES-agentux23.md). Only searches: nothing
is executed, so nothing is learned. Set up a demo database once, then run this against it from each checkout:

    DEBUG=1 SECRET_KEY=x SQLITE_PATH=/tmp/demo.sqlite3 .venv/bin/python manage.py demo --no-serve --data-dir /tmp/dv
    DEBUG=1 SECRET_KEY=x SQLITE_PATH=/tmp/demo.sqlite3 .venv/bin/python bench/demo_confidence.py [--json out.json]

A request with no tool (None) is right only when it is not served high; one with a tool, when that tool is first.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")

# Requests an agent may send that no demo tool serves (time, git, memory, everything; no filesystem, shell, mail,
# web or issue tracker), then requests one tool serves, with that tool.
REQUESTS: list[tuple[str, str | None]] = [
    ("show the server logs", None),
    ("restart the web server", None),
    ("send an email to Bob", None),
    ("what's the weather in Oslo", None),
    ("delete my account", None),
    ("list my GitHub issues", None),
    ("book a flight to Paris", None),
    ("show the error logs from yesterday", None),
    ("tail the nginx access log", None),
    ("list the running processes", None),
    ("push my commits to origin", None),
    ("merge the feature branch into main", None),
    ("revert the last commit", None),
    ("list all users in the database", None),
    ("what is the status of the deployment", None),
    ("clone the repository from GitHub", None),
    ("show the branch protection rules", None),
    ("read the latest log file", None),
    ("show the git config", None),
    ("create a new repository", None),
    ("show the tags of the repo", None),
    ("erase my history", None),
    ("cancel the research", None),
    ("remove my subscription", None),
    ("edit the commit message", None),
    ("delete the last commit", None),
    ("clear the logs", None),
    ("change the timezone to UTC", None),
    ("update the knowledge graph", None),
    ("cancel the long running operation", None),
    ("show me the latest commits", "git::git_log"),
    ("what changed in the last commit", "git::git_show"),
    ("show the git status", "git::git_status"),
    ("what branch am I on", "git::git_branch"),
    ("create a branch called hotfix", "git::git_create_branch"),
    ("commit my changes with message fix typo", "git::git_commit"),
    ("show the staged diff", "git::git_diff_staged"),
    ("reset the staged files", "git::git_reset"),
    ("remove README.md from the staging area", "git::git_reset"),
    ("remember that Bob is a data scientist at Initech", "memory::create_entities"),
    ("add an observation that Alice likes hiking", "memory::add_observations"),
    ("delete the entity Carol", "memory::delete_entities"),
    ("delete the relation between Alice and Acme", "memory::delete_relations"),
    ("show the whole knowledge graph", "memory::read_graph"),
    ("what time is it in London", "time::get_current_time"),
    ("convert 10am Tokyo time to New York", "time::convert_time"),
    ("add 3 and 4", "everything::get-sum"),
    ("echo hello", "everything::echo"),
    ("print all environment variables", "everything::get-env"),
    ("run a long running operation", "everything::trigger-long-running-operation"),
    ("show an annotated message", "everything::get-annotated-message"),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", help="write each request's answer here")
    args = parser.parse_args()

    import django

    django.setup()
    from catalog.models import Tool
    from search.services import tool_search

    visible = frozenset(Tool.objects.values_list("pk", flat=True))
    answers, tally = {}, {"high": [0, 0], "low": [0, 0], "none": [0, 0]}
    for text, wanted in REQUESTS:
        result = tool_search(query=text, visible=visible)
        first = result.matches[0].tool_id if result.matches else ""
        confidence = result.confidence.value
        right = first == wanted if wanted else confidence != "high"
        tally[confidence][0 if right else 1] += 1
        answers[text] = {"confidence": confidence, "first": first, "wanted": wanted, "right": right}
        print(f"{confidence:5} {'ok   ' if right else 'WRONG'} {text[:48]:48} {first}")
    for confidence, (right, wrong) in tally.items():
        print(f"{confidence}: {right + wrong} answers, {wrong} wrong")
    if args.json:
        Path(args.json).write_text(json.dumps(answers, indent=1) + "\n")


if __name__ == "__main__":
    main()
