"""A gateway process warms up before it serves (issue 9): when its lifespan has started, the model is loaded and
has run, the search index is read, and what is alive then is out of the garbage collector's full passes; the
first request pays for none of it."""

from __future__ import annotations

import asyncio
import gc

import pytest

from governance.sanitize import _as_read_table
from mcpgateway.server import build_gateway_app, gateway_lifespan
from search import encoder as encoder_module
from search.backends import backend_get, backends_reset
from search.encoder import encoder_status

from .test_search_descriptors import catalog  # noqa: F401 - the fixture

pytestmark = pytest.mark.django_db(transaction=True)  # the warm-up reads the index on an ORM thread


async def _serving_state() -> dict[str, object]:
    """Start a gateway's lifespan as uvicorn does, and look at the process before any request."""
    server, _routes = build_gateway_app()
    async with gateway_lifespan(server):
        return {
            "encoder": encoder_status(),
            "model_calls": next(iter(encoder_module._loaded.values())).calls if encoder_module._loaded else 0,
            "index_builds": backend_get().builds,
            "frozen": gc.get_freeze_count(),
            "as_read_table": _as_read_table.cache_info().currsize,
        }


def test_the_model_and_the_index_are_ready_before_the_first_request(catalog, monkeypatch):  # noqa: F811
    monkeypatch.setattr(encoder_module, "_loaded", {})  # a fresh process: no model loaded yet
    backends_reset()
    builds = backend_get().builds
    gc.unfreeze()
    _as_read_table.cache_clear()  # a fresh process: what answers are matched as read not built yet
    assert encoder_status() == "not_loaded"
    try:
        state = asyncio.run(_serving_state())
    finally:
        gc.unfreeze()
    assert state["encoder"] == "loaded"
    assert state["model_calls"] >= 1  # run once already: its first call's allocations are behind it
    assert state["index_builds"] == builds + 1  # the snapshot of the current generation, read
    assert state["frozen"] > 0
    assert state["as_read_table"] == 1  # built, not left to the first answer with a non-ASCII text (~0.15 s)


def test_warm_up_off_leaves_it_to_the_first_search(catalog, monkeypatch, settings):  # noqa: F811
    settings.SCOUT_MCP_WARM_UP = False
    monkeypatch.setattr(encoder_module, "_loaded", {})
    backends_reset()
    builds = backend_get().builds
    state = asyncio.run(_serving_state())
    assert state["encoder"] == "not_loaded" and state["index_builds"] == builds


def test_a_snapshot_frozen_at_warm_up_is_freed_when_a_new_generation_replaces_it(catalog):  # noqa: F811
    """Frozen objects are out of every collection, so what ``gc.freeze`` saw must be freed by reference counts
    alone: the index snapshot read at warm-up holds no reference cycle, and a reindex frees it (else every
    worker would keep its first index for life)."""
    import weakref

    from search.services import index_rebuild

    backends_reset()
    backend = backend_get()
    first = weakref.ref(backend.snapshot())
    gc.freeze()
    try:
        index_rebuild()
        assert backend.snapshot() is not first()  # the new generation, read
        assert first() is None
    finally:
        gc.unfreeze()
