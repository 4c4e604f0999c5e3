"""REST API for search: ``POST /api/v1/search/``, the same answer as the MCP ``tool_search`` meta-tool."""
