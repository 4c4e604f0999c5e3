"""Streams for progress tests: a terminal-like StringIO, and a parser for what a bar leaves behind."""

import re
from io import StringIO


class TTY(StringIO):
    """A terminal as far as the command can tell (``isatty()``); keeps what was drawn."""

    def isatty(self) -> bool:
        return True


def last_bar(text: str) -> str:
    """The last state tqdm drew (it redraws with carriage returns)."""
    frames = [frame for frame in re.split(r"[\r\n]", text) if "|" in frame]
    assert frames, f"no progress bar drawn in {text!r}"
    return frames[-1]


def assert_bar_finished(text: str, total: int, unit: str) -> None:
    """The bar reached the total and showed the rate and the time left."""
    bar = last_bar(text)
    assert "100%|" in bar, bar
    assert f"| {total}/{total} [" in bar, bar
    assert re.search(r"\[\d\d:\d\d<\d\d:\d\d, ", bar), bar  # elapsed<left
    assert f"{unit}/s]" in bar or f"s/{unit}]" in bar, bar  # the rate


def assert_plain_lines(text: str, label: str, total: int, unit: str) -> None:
    """Only plain lines: the start and the end (and maybe percent lines), no bar redraws."""
    assert "\r" not in text and "|" not in text, text
    lines = [line for line in text.splitlines() if line.startswith(f"{label}:")]
    assert lines[0] == f"{label}: started, {total} {unit}", text
    assert re.fullmatch(rf"{re.escape(label)}: done, {total}/{total} {unit} in \d+\.\ds", lines[-1]), text
