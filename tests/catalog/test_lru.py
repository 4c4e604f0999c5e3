"""catalog.lru.LruMap, the one bounded map behind every process-local cache (visible sets, found tools, verified
tokens, query vectors): the least recently used entry goes first, by count or by weight, and an entry put with a
time is gone once its ttl has passed since then."""

import time

from catalog.lru import LruMap


def test_the_least_recently_used_entry_goes_first_and_a_popped_one_is_gone():
    kept: LruMap[str, int] = LruMap(2)
    kept.put("a", 1)
    kept.put("b", 2)
    assert kept.get("a") == 1  # used last: "b" is now the oldest
    kept.put("c", 3)
    assert (kept.get("a"), kept.get("b"), kept.get("c"), kept.keys()) == (1, None, 3, ["a", "c"])
    kept.put("a", 10)  # put again: replaced, not held twice
    kept.pop("c")
    kept.pop("missing")
    assert (kept.get("a"), kept.get("c"), len(kept)) == (10, None, 1)


def test_a_weighed_map_holds_its_weight_and_always_keeps_the_entry_put_last():
    kept: LruMap[str, frozenset[int]] = LruMap(3, weigh=len)
    kept.put("a", frozenset({1, 2}))
    kept.put("b", frozenset({3}))
    kept.put("c", frozenset({4, 5}))  # 5 held: "a" goes, 3 held
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == (None, {3}, {4, 5})
    kept.put("huge", frozenset(range(10)))
    assert (len(kept), kept.get("huge")) == (1, frozenset(range(10)))
    kept.clear()
    kept.put("d", frozenset({1, 2}))  # the weight held was forgotten with the entries
    kept.put("e", frozenset({3}))
    assert (kept.get("d"), kept.get("e")) == ({1, 2}, {3})


def test_an_entry_expires_ttl_seconds_after_the_time_it_was_put_with():
    kept: LruMap[str, int] = LruMap(10, ttl=60)
    kept.put("fresh", 1)
    kept.put("read-long-ago", 2, at=time.time() - 60)
    assert (kept.get("fresh"), kept.get("read-long-ago"), len(kept)) == (1, None, 1)
    assert LruMap(10).get("x") is None
