"""Reads for the gateway: which of a caller's visible tools are listed, and how they are named for clients."""

from __future__ import annotations

import hashlib
import re

from django.db.models import QuerySet

from catalog.models import Tool
from governance.principals import Principal
from governance.selectors import tool_pks_visible_to, tools_not_serving_for

from .constants import MAX_CLIENT_TOOL_NAME, NAMESPACE_SEPARATOR
from .models import PinnedTool

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")


def client_tool_name(*, server_slug: str, tool_name: str) -> str:
    """The name a directly listed tool gets: ``server__tool``, valid for MCP clients (``[A-Za-z0-9_.-]``,
    at most 64 characters). A name that had to be changed or shortened gets a hash of the exact tool id,
    so two tools never share a client name."""
    raw = f"{server_slug}{NAMESPACE_SEPARATOR}{tool_name}"
    safe = _UNSAFE.sub("_", raw)
    if safe == raw and len(safe) <= MAX_CLIENT_TOOL_NAME:
        return safe
    digest = hashlib.sha256(f"{server_slug}::{tool_name}".encode()).hexdigest()[:8]
    return f"{safe[: MAX_CLIENT_TOOL_NAME - 9]}_{digest}"


def _listed(pks: frozenset[int] | set[int]) -> QuerySet[Tool]:
    return Tool.objects.filter(pk__in=pks).select_related("server", "policy__risk_class").order_by("tool_id")


def _unambiguous(tools: list[Tool]) -> dict[str, Tool]:
    """``tools`` by their client names, leaving out every name two of them share. Slugs and tool names may both
    hold the separator: server "data"'s tool "lake__query" (an upstream names its own tools) is "data__lake__query",
    as is server "data__lake"'s "query", and a call by that name went to the first by tool id, with arguments meant
    for the other (shadowing, T8). Such tools are listed under no name and stay reachable by tool_id."""
    named: dict[str, Tool] = {}
    shared: set[str] = set()
    for tool in tools:
        name = client_tool_name(server_slug=tool.server.slug, tool_name=tool.name)
        if name in named:
            shared.add(name)
        named[name] = tool
    return {name: tool for name, tool in named.items() if name not in shared}


def tools_listed_for(*, principal: Principal, pinned_only: bool = False) -> list[Tool]:
    """The caller's visible tools as ``tools/list`` shows them directly (all, or only the pinned ones); a pinned tool
    whose name another visible tool shares is called by tool_id only (``tool_for_client_name`` refuses the name)."""
    visible = tool_pks_visible_to(principal=principal)
    if not pinned_only:
        return list(_unambiguous(list(_listed(visible))).values())
    pinned = [pk for pk in PinnedTool.objects.values_list("tool_id", flat=True) if pk in visible]
    order = {pk: i for i, pk in enumerate(pinned)}
    return sorted(_listed(set(pinned)), key=lambda tool: order[tool.pk])


def tool_for_client_name(*, principal: Principal, name: str) -> Tool | None:
    """The visible tool listed under ``name``, or None (unknown, hidden and shared by two visible tools alike)."""
    if not isinstance(name, str) or not name or len(name) > MAX_CLIENT_TOOL_NAME:
        return None
    return _unambiguous(list(_listed(tool_pks_visible_to(principal=principal)))).get(name)


def tool_not_serving_for_client_name(*, principal: Principal, name: str) -> Tool | None:
    """The caller's tool that would be listed under ``name`` were its server serving (``tools_not_serving_for``),
    or None: asked after ``tool_for_client_name`` missed, for a hidden and an unknown name alike (Z5)."""
    if not isinstance(name, str) or not name or len(name) > MAX_CLIENT_TOOL_NAME:
        return None
    tools = tools_not_serving_for(principal=principal, permission="execute").select_related("server")
    return _unambiguous(list(tools)).get(name)
