"""ReadOnce (governance.cache): the read-once memo a search's version row and index generation share."""

from __future__ import annotations

import pytest

from governance.cache import ReadOnce, visibility_invalidate, visibility_row_read_once, visibility_row_token
from governance.models import VisibilityVersion


class Counter:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.calls


def test_a_block_reads_once_a_nested_block_shares_it_and_forget_reads_again():
    once, fetch = ReadOnce("test_read_once"), Counter()
    with once.block():
        assert [once.read(fetch), once.read(fetch)] == [1, 1]
        with once.block():
            assert once.read(fetch) == 1
        once.forget()
        assert [once.read(fetch), once.read(fetch)] == [2, 2]
    assert fetch.calls == 2


def test_outside_a_block_every_read_fetches_and_none_is_a_value_kept():
    once, fetch = ReadOnce("test_read_once_outside"), Counter()
    assert [once.read(fetch), once.read(fetch)] == [1, 2]
    nones = Counter()

    def nothing() -> None:
        nones()

    with once.block():
        assert once.read(nothing) is None and once.read(nothing) is None
    assert nones.calls == 1


@pytest.mark.django_db
def test_a_change_made_within_the_block_is_read_by_its_next_token():
    with visibility_row_read_once():
        before = visibility_row_token()
        visibility_invalidate()
        after = visibility_row_token()
        assert after != before
        assert after == VisibilityVersion.objects.get().token
