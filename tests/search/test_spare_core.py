"""The spare core: a lone multi-step request's parts encoded alone beside its one pass, on a thread of their
own, used only if its answer would be withheld; nothing is started under load. The answers are the ones
searched without it."""

import os
import threading

import pytest

from search.encoder import SpareCore, query_cache, spare_core
from search.engine.ranking import Confidence
from search.services import tool_search

from .test_one_pass_parts import LOOSE_FIT, NO_FIT

pytestmark = pytest.mark.slow


@pytest.fixture
def idle_machine(encoder, settings, monkeypatch):
    """One-pass parts on, the spare core on, and a core idle whenever asked: the machine's load is not the
    test's to set (``idle_cores`` itself is tested below)."""
    assert encoder.runtime == "onnx"
    settings.SCOUT_SEARCH_ONE_PASS_PARTS = True
    settings.SCOUT_SEARCH_SPARE_CORE = True
    monkeypatch.setattr("search.encoder.idle_cores", lambda: 1)
    query_cache().clear()
    yield encoder
    query_cache().clear()


@pytest.fixture
def visible(small_catalog, reindex):
    from search.services import index_rebuild

    reindex(index_rebuild)
    return {tool.pk for tool in small_catalog.values()}


def _answer(result):
    return result.confidence, [(m.tool_id, m.score, m.why_matched) for m in result.matches]


def _search(query, visible, settings, *, spare: bool):
    settings.SCOUT_SEARCH_SPARE_CORE = spare
    query_cache().clear()
    return tool_search(query=query, visible=visible, top_k=5, enforce_abstention=False)


def test_a_withheld_lone_request_is_searched_again_with_the_parts_encoded_beside_it(idle_machine, visible, settings):
    without = _search(NO_FIT, visible, settings, spare=False)
    assert without.confidence is Confidence.NONE  # so its parts alone are needed
    started, batched = spare_core().started, idle_machine.batcher.requests
    served = _search(NO_FIT, visible, settings, spare=True)
    assert spare_core().started == started + 1
    assert idle_machine.batcher.requests == batched + 1  # the one pass only: the retry waited for no model call
    assert _answer(served) == _answer(without)


def test_a_served_answer_drops_the_parts_encoded_beside_it(idle_machine, visible, settings):
    without = _search(LOOSE_FIT, visible, settings, spare=False)
    assert without.confidence is Confidence.LOW and without.matches
    started, batched = spare_core().started, idle_machine.batcher.requests
    served = _search(LOOSE_FIT, visible, settings, spare=True)
    assert spare_core().started == started + 1
    assert idle_machine.batcher.requests == batched + 1
    assert _answer(served) == _answer(without)


def test_nothing_is_started_while_another_search_is_in_flight(idle_machine, visible, settings):
    without = _search(NO_FIT, visible, settings, spare=False)
    started, batched = spare_core().started, idle_machine.batcher.requests
    with spare_core().searching():  # another request of this process, mid-search
        served = _search(NO_FIT, visible, settings, spare=True)
    assert spare_core().started == started
    assert idle_machine.batcher.requests == batched + 2  # the one pass, then the parts alone: both on its path
    assert _answer(served) == _answer(without)


def test_nothing_is_started_without_an_idle_core(idle_machine, visible, settings, monkeypatch):
    monkeypatch.setattr("search.encoder.idle_cores", lambda: 0)
    started = spare_core().started
    served = _search(NO_FIT, visible, settings, spare=True)
    assert spare_core().started == started
    assert served.confidence is Confidence.NONE


def test_a_single_step_request_starts_nothing(idle_machine, visible, settings):
    started = spare_core().started
    _search("get the weather forecast for Lyon", visible, settings, spare=True)
    assert spare_core().started == started


def test_one_call_at_a_time_on_the_spare_thread(monkeypatch):
    monkeypatch.setattr("search.encoder.idle_cores", lambda: 1)
    core = SpareCore()
    assert core.start(lambda: 1) is None  # no search in flight: nothing to speed up
    release = threading.Event()
    with core.searching():
        held = core.start(release.wait, 60)
        assert held is not None and core.start(lambda: 2) is None  # the spare thread is busy
        release.set()
        assert held.result(60) is True
        again = core.start(lambda: 3)
        while again is None:  # the done-callback frees the thread just after the result is set
            threading.Event().wait(0.01)
            again = core.start(lambda: 3)
        assert again.result(60) == 3
    assert core.started == 2


def test_idle_cores_counts_the_calling_thread_as_running():
    from search.encoder import idle_cores

    if not os.path.exists("/proc/loadavg"):
        assert idle_cores() == 0  # unknown: never idle
    else:
        assert idle_cores() <= len(os.sched_getaffinity(0)) - 1
