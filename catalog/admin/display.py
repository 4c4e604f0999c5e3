"""Rendering helpers for the catalog admin. Upstream text is untrusted: everything goes through format_html."""

import difflib
import json
import re
from collections.abc import Callable
from datetime import datetime
from functools import cached_property
from operator import attrgetter
from typing import Any

from django.contrib import admin
from django.core.paginator import Paginator
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape, format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe

from catalog.choices import ServerStatus, SyncStatus

LARGE_TABLE_COUNT_CAP = 10_000

STATUS_COLOURS = {
    ServerStatus.ACTIVE: "#2e7d32",
    ServerStatus.DEGRADED: "#ef6c00",
    ServerStatus.UNAVAILABLE: "#c62828",
    ServerStatus.DISABLED: "#757575",
    ServerStatus.ARCHIVED: "#9e9e9e",
    SyncStatus.SUCCESS: "#2e7d32",
    SyncStatus.PARTIAL: "#ef6c00",
    SyncStatus.FAILED: "#c62828",
    SyncStatus.QUEUED: "#5c6bc0",
    SyncStatus.RUNNING: "#1565c0",
    SyncStatus.SKIPPED: "#757575",
    "live": "#2e7d32",
    "removed": "#c62828",
    "disabled": "#757575",
    "held": "#8e24aa",
    "never": "#757575",
}


def run_tool_counts(run: Any) -> str:
    """What a sync run did to tools, the counts that are not zero ("10 added", "1 removed · 9 unchanged"), or ""."""
    counts = [(getattr(run, name), name) for name in ("added", "changed", "removed", "rejected", "unchanged")]
    return " · ".join(f"{count} {name}" for count, name in counts if count)


def badge(value: str, label: str, *, wrap: bool = False) -> str:
    """A status as a coloured pill, on one line unless ``wrap`` (a narrow list column)."""
    colour = STATUS_COLOURS.get(value, "#757575")
    shape = "display:inline-block;white-space:normal" if wrap else "white-space:nowrap"
    return format_html(
        '<span style="background:{};color:#fff;padding:2px 8px;border-radius:10px;{}">{}</span>', colour, shape, label
    )


def run_status_badge(status: str, *, wrap: bool = False) -> str:
    """A sync run's status as a pill; a run that did not run says "Not run" and its error column why (the server is
    disabled or archived, imported, or another sync of it was running)."""
    return badge(status, SyncStatus(status).label, wrap=wrap)


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def json_block(value: Any) -> str:
    if value is None:
        return "—"
    return format_html('<pre style="white-space:pre-wrap;max-height:40em;overflow:auto">{}</pre>', pretty_json(value))


def text_block(value: str) -> str:
    if not value:
        return "—"
    return format_html('<pre style="white-space:pre-wrap">{}</pre>', value)


_ID_SEPARATOR = re.compile(r"(::|_)")
# ... and in a message, also after the slashes of a path or URL (a hyphen is a break already).
_TEXT_SEPARATOR = re.compile(r"(::|_|/)")


_NAME_SEPARATORS = "._@/"
# A run of letters this long without a place to break (``financereportingwarehouseconnector``) may break anywhere, so
# one such name never widens its column past the page (scout-long in admin.css); shorter parts stay whole.
LONG_RUN = 24


def _runs_marked(pieces: list[str]) -> SafeString:
    """``pieces`` (text between break opportunities, each ending where a ``<wbr>`` goes) escaped and joined with
    ``<wbr>``; a piece longer than ``LONG_RUN`` in a span that may break anywhere."""
    marked = [
        format_html('<span class="scout-long">{}</span>', piece) if _unbroken_run(piece) > LONG_RUN else escape(piece)
        for piece in pieces
        if piece
    ]
    return mark_safe("<wbr>".join(marked))  # noqa: S308 - each piece escaped


def _unbroken_run(piece: str) -> int:
    """The longest stretch of ``piece`` a browser cannot break (a space and a hyphen are breaks already)."""
    return max((len(word) for word in piece.replace("-", " ").split()), default=0)


def breakable_name(value: str) -> SafeString:
    """A person's or agent's name (``konstantinopoulou.alexandra``, ``CustomerSupportTriageAssistant``) that wraps in
    a narrow column only where a reader would break it: after ``.``, ``_``, ``@`` or ``/`` and where a capital follows
    a small letter (a hyphen and a space are breaks already), never letter by letter unless a run has no such place
    for ``LONG_RUN`` letters. Escaped; a loop, not a regex (names are user input, and splitting camelCase needs a
    look-behind RE2 lacks)."""
    pieces, previous = [""], ""
    for ch in value:
        if (previous and previous in _NAME_SEPARATORS) or (previous.islower() and ch.isupper()):
            pieces.append("")
        pieces[-1] += ch
        previous = ch
    return _runs_marked(pieces)


def breakable_id(value: str, *, text: bool = False) -> SafeString:
    """An identifier (``memory::create_entities``) that wraps only after ``::`` and ``_`` in a narrow column,
    never letter by letter unless a part is longer than ``LONG_RUN``: escaped, with a ``<wbr>`` after each
    separator. ``text``: a message, whose paths and URLs (``/opt/vendor/bin/mcp-weather``) also wrap after their
    slashes."""
    separator = _TEXT_SEPARATOR if text else _ID_SEPARATOR
    parts = separator.split(value)  # [part, separator, part, ...]: each separator ends the part before it
    pieces = [part + (parts[i + 1] if i + 1 < len(parts) else "") for i, part in enumerate(parts) if i % 2 == 0]
    return _runs_marked(pieces)


def breakable_column(path: str, *, description: str, ordering: str | None = None) -> Callable[[Any, Any], SafeString]:
    """A list column (a ModelAdmin method) showing the attribute at ``path`` (``"server.slug"``) through
    ``breakable_id``, sorted by it (``ordering``: the field to sort by where it differs from ``path``)."""
    value_at = attrgetter(path)

    @admin.display(description=description, ordering=ordering or path.replace(".", "__"))
    def column(model_admin: Any, obj: Any) -> SafeString:
        return breakable_id(value_at(obj))

    return column


def compact_time(value: datetime | None) -> str:
    """A moment in a list column: the date over the time, local, in two short lines ("—" for none), so that
    lists keep every column in view beside both sidebars at 1280 px."""
    if value is None:
        return "—"
    local = timezone.localtime(value)
    return format_html('<span class="scout-time">{}<br><small>{}</small></span>', f"{local:%Y-%m-%d}", f"{local:%H:%M}")


def admin_link(obj: Any, label: str | None = None) -> str:
    if obj is None:
        return "—"
    url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_change", args=[obj.pk])
    return format_html('<a href="{}">{}</a>', url, label if label is not None else str(obj))


class CappedCountPaginator(Paginator):
    """For append-only tables: counts at most LARGE_TABLE_COUNT_CAP rows instead of scanning the table."""

    @cached_property
    def count(self) -> int:
        return self.object_list[:LARGE_TABLE_COUNT_CAP].count()


DIFF_LINE_STYLES = {"+": "background:#e6ffec", "-": "background:#ffebe9", "@": "color:#6e7781"}


def render_unified_diff(before: str, after: str) -> str:
    """A unified diff of two texts as escaped HTML; every line of upstream text goes through format_html."""
    lines = list(
        difflib.unified_diff(before.splitlines(), after.splitlines(), "previous", "this revision", n=3, lineterm="")
    )
    if not lines:
        return "— (identical)"
    rendered = format_html_join(
        "\n", '<span style="{}">{}</span>', ((DIFF_LINE_STYLES.get(line[:1], ""), line) for line in lines)
    )
    return format_html('<pre class="scout-diff" style="white-space:pre-wrap">{}</pre>', rendered)
