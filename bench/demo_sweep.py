"""The demo sweep of bench/NOTES-agentux22.md: 72 requests an agent may send, through MCP, each answer's first
three tools and its confidence.

Runs against a running demo (``make demo``: time, git, memory, everything) with the SDK client over HTTP
(``mode="legacy"``, as ``tests/mcpgateway/conftest.py::mcp_client``), ``tool_search`` with the default top_k. Only
searches: nothing is executed, so the sweep teaches the gateway nothing (a call after a search is a learned
request). ``--json`` writes the answers; ``--compare BEFORE.json`` prints the rows whose answer differs.

    .venv/bin/python bench/demo_sweep.py --url http://127.0.0.1:8000/mcp --token scout_... --json after.json \
        [--compare before.json]
"""

from __future__ import annotations

import argparse
import json
from typing import Any

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

REQUESTS = [
    "what time is it in Tokyo",
    "convert 3pm New York time to Berlin time",
    "what's the time difference between London and Sydney",
    "if it's 9am in Paris, what time is it in Los Angeles",
    "show me the latest commits",
    "what changed in the last commit",
    "commit my changes with message fix typo",
    "create a new branch called feature-login",
    "delete the branch old-feature",
    "show the diff of unstaged changes",
    "what files did I modify",
    "find the file that mentions TODO and commit it",
    "remember that Bob is a data scientist at Initech",
    "what do you know about Bob",
    "delete the relation between Alice and Acme",
    "add an observation that Alice likes hiking",
    "forget that Bob works at Initech",
    "list all entities in memory",
    "read README.md",
    "write a file called notes.txt with hello",
    "delete the file old.log",
    "add 17 and 25",
    "echo back hello world",
    "print an environment variable",
    "generate a tiny image",
    "quelle heure est-il à Tokyo",
    "affiche les derniers commits",
    "souviens-toi qu'Alice aime le thé",
    "wie spät ist es in New York",
    "zeige mir den Git-Status",
    "¿qué hora es en Madrid?",
    "muestra el historial de commits",
    "東京は今何時ですか",
    "最新のコミットを表示して",
    "waht tiem is it in tokio",
    "shwo me teh git logg",
    "book a flight to Paris",
    "send an email to my boss",
    "what's the weather in London tomorrow",
    "order a pizza",
    "translate this sentence to German",
    "check the status",
    "show me everything",
    "undo that",
    "read my emails",
    "open the config file",
    "read the PDF report",
    "search the web for MCP servers",
    "create a calendar event for Monday",
    "delete my account",
    "list my GitHub issues",
    "show me my calendar",
    "fetch https://example.com",
    "run the tests",
    "search for files containing foo",
    "get the weather in Paris",
    "show the server logs",
    "create a Jira ticket",
    "list the docker containers",
    "read the file notes.txt",
    "show me the contents of main.py",
    "list the open pull requests",
    "get the stock price of Apple",
    "search my notes for Alice",
    "create a todo list",
    "show all branches",
    "read the knowledge graph",
    "remember that Carol prefers tea",
    "what does Carol prefer",
    "generate a tiny image of a cat",
    "show me the whole knowledge graph",
    "print all environment variables",
]


async def sweep(url: str, token: str) -> list[dict[str, Any]]:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    answers = []
    async with Client(streamable_http_client(url, http_client=http), mode="legacy") as client:
        for number, request in enumerate(REQUESTS, start=1):
            answer = (await client.call_tool("tool_search", {"query": request})).structured_content or {}
            tools = [match["tool_id"] for match in answer.get("matches", [])]
            answers.append({"n": number, "request": request, "confidence": answer.get("confidence"), "tools": tools})
    return answers


def _line(answer: dict[str, Any]) -> str:
    first_three = ", ".join(answer["tools"][:3]) or "-"
    return f"{answer['n']:>2} {answer['confidence'] or '-':<5} {first_three:<90} {answer['request']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--token", required=True)
    parser.add_argument("--json", help="write the answers here")
    parser.add_argument("--compare", help="an earlier --json: print the requests whose answer differs")
    args = parser.parse_args()
    answers = anyio.run(sweep, args.url, args.token)
    for answer in answers:
        print(_line(answer))
    if args.json:
        with open(args.json, "w") as out:
            json.dump(answers, out, indent=1, ensure_ascii=False)
    if args.compare:
        with open(args.compare) as before_file:
            before = {row["request"]: row for row in json.load(before_file)}
        print("\nchanged (before -> after):")
        for answer in answers:
            old = before.get(answer["request"])
            if old and (old["confidence"], old["tools"][:3]) != (answer["confidence"], answer["tools"][:3]):
                print(" before", _line(old))
                print(" after ", _line(answer))


if __name__ == "__main__":
    main()
