"""One bounded map per process, least recently used first out: what every process-local cache in front of the
shared cache or the database keeps its entries in (the visible sets and found tools of governance, the gateway's
verified tokens, the query vectors of search)."""

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class LruMap(Generic[K, V]):
    """A thread-safe map holding at most ``size`` entries, or, with ``weigh``, entries whose weights add up to at most
    ``size`` (the entry put last is kept whatever it weighs); the least recently used goes first. With ``ttl``, an
    entry is gone ``ttl`` seconds after the time it was put with (``put(at=...)``: when its value was read, so that
    it is dropped no later than the shared cache that holds the same value drops it)."""

    def __init__(self, size: int, *, ttl: float | None = None, weigh: Callable[[V], int] | None = None) -> None:
        self.size = size  # read at each put: a caller may change it
        self._ttl = ttl
        self._weigh = weigh
        self._entries: OrderedDict[K, tuple[float, V]] = OrderedDict()
        self._held = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            kept = self._entries.get(key)
            if kept is None:
                return None
            if self._ttl is not None and time.time() - kept[0] >= self._ttl:
                self._drop(key)
                return None
            self._entries.move_to_end(key)
            return kept[1]

    def put(self, key: K, value: V, *, at: float | None = None) -> None:
        with self._lock:
            if key in self._entries:
                self._drop(key)
            self._entries[key] = (time.time() if at is None else at, value)
            self._held += self._weight(value)
            while self._held > self.size and len(self._entries) > 1:
                self._drop(next(iter(self._entries)))

    def pop(self, key: K) -> None:
        with self._lock:
            if key in self._entries:
                self._drop(key)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._held = 0

    def keys(self) -> list[K]:
        """The keys held now, least recently used first."""
        with self._lock:
            return list(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def _weight(self, value: V) -> int:
        return 1 if self._weigh is None else self._weigh(value)

    def _drop(self, key: K) -> None:
        self._held -= self._weight(self._entries.pop(key)[1])
