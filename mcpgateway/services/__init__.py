"""What the meta-tools do, for one verified principal. The MCP handlers in ``tools.py`` and ``server.py``
only translate to and from the protocol; every decision is made here or in governance and search."""

from .discovery import (
    GatewayInputError,
    NotServing,
    SearchAnswer,
    UnknownTool,
    compact_json,
    for_mcp,
    gateway_inspect,
    gateway_search,
    schema_for_model,
    schema_texts_for_model,
    text_for_model,
    tool_descriptor,
    tool_hints,
    tool_ids_close_to,
    tool_name_not_serving,
)
from .execution import (
    ExecutionPlan,
    arguments_problem,
    error_result,
    execute_finish,
    execute_prepare,
    gateway_execute,
)

__all__ = [
    "ExecutionPlan",
    "GatewayInputError",
    "NotServing",
    "SearchAnswer",
    "UnknownTool",
    "arguments_problem",
    "compact_json",
    "error_result",
    "execute_finish",
    "execute_prepare",
    "for_mcp",
    "gateway_execute",
    "gateway_inspect",
    "gateway_search",
    "schema_for_model",
    "schema_texts_for_model",
    "text_for_model",
    "tool_descriptor",
    "tool_hints",
    "tool_ids_close_to",
    "tool_name_not_serving",
]
