"""Gateway constants: meta-tool names, namespacing of directly listed tools, fixed error texts."""

META_TOOL_SEARCH = "tool_search"
META_TOOL_INSPECT = "tool_inspect"
META_TOOL_EXECUTE = "execute_tool"
META_TOOLS = (META_TOOL_SEARCH, META_TOOL_INSPECT, META_TOOL_EXECUTE)

# Directly listed tools are named "<server>__<tool>" (MCP clients accept [A-Za-z0-9_.-], 1..64 is safe for
# every host we know); a name that would not fit gets a short hash suffix.
NAMESPACE_SEPARATOR = "__"
MAX_CLIENT_TOOL_NAME = 64

# Search limits (top_k, query length, filters) are search's: search.services and SCOUT_SEARCH_MAX_QUERY_CHARS.
MAX_INSPECT_IDS = 20
MAX_TOOL_ID_CHARS = 460
MAX_IDEMPOTENCY_KEY_CHARS = 200
MAX_APPROVAL_ID_CHARS = 64

# One text for a hidden and an unknown tool alike, never echoing what was asked for (T3, T4, Z4). Its second
# sentence is for an id a search did return, of a tool disabled, held or no longer granted since: told only to copy
# the id exactly, a model that had copied it retried it or gave up instead of searching again.
UNKNOWN_TOOL_GUIDANCE = (
    "Use a tool_id exactly as tool_search returned it; do not guess tool ids. If tool_search did return this one, "
    "the tool is no longer available to you: search again for another."
)
UNKNOWN_TOOL_MESSAGE = "Unknown tool. " + UNKNOWN_TOOL_GUIDANCE
# A tool of the caller's own whose server is not serving (Degraded, Unavailable, Disabled, Archived): why, and whether
# it comes back by itself. Told "Unknown tool", a model that had the id from tool_search searched again for the tool it
# already had, or told the user it does not exist.
SERVER_NOT_SERVING_WHY = {
    "degraded": ("its last sync failed", True),
    "unavailable": ("it did not answer its health check", True),
    "disabled": ("an operator disabled it", False),
    "archived": ("an operator archived it", False),
}
SERVER_BACK_LATER = (
    "Scout serves its tools again once the server syncs: try again in a few minutes, or use another tool for this step."
)
SERVER_STOPPED = (
    "It will not come back by itself: do not retry; search for another tool for this step, or tell the user."
)
# The protocol error for a tools/call name that is not listed: models often call a tool_id from tool_search by name.
UNKNOWN_TOOL_NAME_MESSAGE = (
    "Unknown tool name. Call only tools that tools/list gives; run a tool_id that tool_search returned "
    "(server::tool) with execute_tool, never by name."
)
# tool_inspect with several ids names the unknown (or hidden: the same) ones, as the caller sent them, cut to this.
UNKNOWN_ID_SHOWN_CHARS = 80

# The result's ``_meta`` key marking upstream tool output as untrusted data (services/output.py).
SCOUT_META_PREFIX = "dev.scout"
OUTPUT_META_KEY = f"{SCOUT_META_PREFIX}/output"
