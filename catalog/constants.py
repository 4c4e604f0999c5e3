TOOL_ID_SEPARATOR = "::"


def make_tool_id(server_slug: str, tool_name: str) -> str:
    return f"{server_slug}{TOOL_ID_SEPARATOR}{tool_name}"
