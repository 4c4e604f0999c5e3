"""URLs in text an operator or curator reads (errors, log lines): their paths cut off.

A hosted MCP server's URL often carries its secret in the path (``https://mcp.example/s/<key>/mcp``); ``safe_url``
(catalog/upstream.py) drops user info, query and fragment but keeps the path. No Django import here: the logging
filters (scoutsite/logfilters.py) use it before the apps are loaded.
"""

import re2

# A URL in a message: its scheme and host (with port) kept, its path cut off. re2: log messages and errors quote
# upstreams, and Python's re took 9 s on 40,000 characters of "a.a.a." (each word a start, each scanned to the end).
_URL_PATH_RE = re2.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^/\s?#]+)(/\S*)")


def url_paths_cut(text: str) -> str:
    """``text`` with each URL cut to its origin (``https://mcp.example/…``). A path of one or two digits is kept: a
    Redis database's (``redis://127.0.0.1:6379/11``, which the Celery worker logs as it connects) names no secret."""
    if "://" not in text:
        return text
    return _URL_PATH_RE.sub(_cut, text)


def _cut(match: re2._Match) -> str:  # re2 names its match class privately
    origin, path = match.group(1), match.group(2)
    number = path[1:].rstrip(".,;:)")
    if number.isdigit() and len(number) <= 2:
        return match.group(0)
    return f"{origin}/…"
