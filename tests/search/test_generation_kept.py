"""The current index generation is kept per process (issue 9): read from the database once per
SCOUT_SEARCH_GENERATION_CHECK_SECONDS, never from the cache, and a generation made ready by another process is
served once that period ends, one made ready by this process at once."""

from __future__ import annotations

import uuid

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog.cachesafe import shared_cache
from search import selectors
from search.choices import GenerationKind, GenerationStatus
from search.models import IndexGeneration
from search.selectors import current_generation_token, generation_token_forget, generation_token_keep

pytestmark = pytest.mark.django_db


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    clock = Clock()
    monkeypatch.setattr(selectors, "monotonic", clock)
    return clock


def ready_generation() -> str:
    """A generation made ready as another process makes it: a row, no announce here."""
    token = uuid.uuid4()
    IndexGeneration.objects.create(kind=GenerationKind.FULL, status=GenerationStatus.READY, token=token)
    return str(token)


def generation_reads(queries: CaptureQueriesContext) -> int:
    return sum(1 for query in queries if IndexGeneration._meta.db_table in query["sql"])


def test_the_generation_is_read_once_per_period_and_never_from_the_cache(settings, clock, monkeypatch):
    settings.SCOUT_SEARCH_GENERATION_CHECK_SECONDS = 0.5
    cache_calls: list[str] = []
    for method in ("get", "set", "add", "delete"):
        real = getattr(shared_cache(), method)
        monkeypatch.setattr(
            shared_cache(), method, lambda *a, _m=method, _real=real, **k: cache_calls.append(_m) or _real(*a, **k)
        )
    first = ready_generation()
    generation_token_forget()
    with CaptureQueriesContext(connection) as queries:
        assert [current_generation_token() for _ in range(5)] == [first] * 5
    assert generation_reads(queries) == 1 and cache_calls == []

    second = ready_generation()  # another process's: seen when the period ends, not before
    clock.now += 0.4
    with CaptureQueriesContext(connection) as queries:
        assert current_generation_token() == first
    assert generation_reads(queries) == 0
    clock.now += 0.1
    with CaptureQueriesContext(connection) as queries:
        assert [current_generation_token() for _ in range(3)] == [second] * 3
    assert generation_reads(queries) == 1 and cache_calls == []


def test_a_generation_this_process_announces_is_served_at_once(settings, clock):
    settings.SCOUT_SEARCH_GENERATION_CHECK_SECONDS = 0.5
    ready_generation()
    generation_token_forget()
    current_generation_token()
    announced = ready_generation()
    generation_token_keep(announced)
    with CaptureQueriesContext(connection) as queries:
        assert current_generation_token() == announced
    assert generation_reads(queries) == 0
