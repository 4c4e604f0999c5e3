"""One log record, one line (T15).

Log messages carry text Scout did not write: an upstream's error message, the tail of a dying server's stderr, a
document's parse error. Written as it came, a line break in it started a log line of the upstream's making (a
forged ``governance.audit ... approved``), and a carriage return or a terminal escape reached whoever read the log
in a terminal. ``OneLineMessages`` escapes every control character of a message (``\\n``, ``\\x1b``) and the
Unicode line separators and bidi controls, so each record stays one line, read as written; the text is kept.
A traceback logged with a record keeps its lines, but each exception's own line (its type and message, which may
quote an upstream: an upstream's error is raised from the SDK's error carrying its words) is escaped the same way.

Both also have each URL cut to its origin (``https://mcp.example/…``, catalog/urltext.py): a hosted server's URL
often carries its secret in the path, and a failed sync logged it whole ("HTTP 404 from https://…/s/<key>/mcp") in
the log every operator and log shipper reads (opsux7). The admin shows the full error to who may see the URL.
"""

from __future__ import annotations

import logging
import os
import threading
import traceback

import mcp

from catalog.urltext import url_paths_cut

_ESCAPES: dict[int, str] = {code: f"\\x{code:02x}" for code in (*range(0x20), 0x7F, *range(0x80, 0xA0))}
_ESCAPES.update({0x09: "\t", 0x0A: "\\n", 0x0D: "\\r"})  # a tab breaks no line: kept
_ESCAPES.update({code: f"\\u{code:04x}" for code in (0x2028, 0x2029, *range(0x202A, 0x202F), *range(0x2066, 0x206A))})


def _log_safe(text: str) -> str:
    return url_paths_cut(text).translate(_ESCAPES)


class OneLineMessages(logging.Filter):
    """A handler's filter: the record's message with its control characters escaped and its URLs' paths cut (see
    the module)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        escaped = _log_safe(message.removesuffix("\n"))  # a last line break forges nothing (uvicorn ends one so)
        if escaped != message:
            record.msg, record.args = escaped, None
        if record.exc_info and record.exc_info[1] is not None:
            record.exc_text = _traceback(record.exc_info[1])  # the formatter writes it as given
        return True


def _traceback(error: BaseException) -> str:
    """``error``'s traceback as ``logging.Formatter.formatException`` writes it, with each exception's own line
    (``Type: message`` and its notes; the frames are Scout's code) one line, escaped, URL paths cut: along the chain
    of causes and contexts and inside exception groups (the SDK's task groups raise those)."""
    top = traceback.TracebackException.from_exception(error)
    pending, seen = [top], set()
    while pending:
        node = pending.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        line = _log_safe("".join(node.format_exception_only()).rstrip("\n")) + "\n"
        node.format_exception_only = lambda *args, _line=line, **kwargs: iter([_line])  # type: ignore[method-assign]
        pending += [other for other in (node.__cause__, node.__context__, *(node.exceptions or ())) if other]
    return "".join(top.format()).removesuffix("\n")


SITE_RECORDS_PER_WINDOW = 10
_SDK_DIRECTORY = os.path.dirname(mcp.__file__) + os.sep
SITE_WINDOW_SECONDS = 60.0


class SdkRecordsPerSite(logging.Filter):
    """A handler's filter: at most ``SITE_RECORDS_PER_WINDOW`` records a minute from each place in the MCP SDK that
    logs (its file and line: not every SDK logger is named ``mcp.*``, the client session's is ``client``); the first
    one written after some were left out says how many.

    The SDK logs what an upstream got wrong per message, with a traceback: a stdio line that parses as JSON but is no
    JSON-RPC message (``{}``), a notification whose params do not validate.
    An upstream choosing to send such messages chose how much Scout logs: 2,000 lines of ``{}`` before each answer
    had a listing log 6,000 tracebacks (15 MB) and take 10 s instead of 0.5 s (line_guard drops only lines that are
    not objects). Counted per place, not per message, since messages such as "Unknown SSE event: …" quote the
    upstream, which could make each one new."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._sites: dict[tuple[str, int], list[float]] = {}  # (file, line) -> [window start, written, left out]

    def filter(self, record: logging.LogRecord) -> bool:
        if not record.pathname.startswith(_SDK_DIRECTORY):
            return True
        site = (record.pathname, record.lineno)
        with self._lock:
            state = self._sites.get(site)
            left_out = 0
            if state is None or record.created - state[0] >= SITE_WINDOW_SECONDS:
                left_out = int(state[2]) if state is not None else 0
                state = self._sites[site] = [record.created, 0, 0]
            if state[1] >= SITE_RECORDS_PER_WINDOW:
                state[2] += 1
                return False
            state[1] += 1
            last = state[1] == SITE_RECORDS_PER_WINDOW
        notes = []
        if left_out:
            notes.append(f"{left_out} more from here left out of the log in the minute before")
        if last:
            notes.append("more from here this minute are left out of the log")
        if notes:
            record.msg, record.args = f"{record.getMessage()} ({'; '.join(notes)})", None
        return True
