"""/healthz and /readyz: unauthenticated, JSON, naming checks but never configuration."""

import contextvars
import json
import socket

import pytest
from django.db import connection
from django.test import override_settings

from scoutsite.health import readyz
from search.services import index_rebuild
from tests.db_refusal import connections_refused

pytestmark = pytest.mark.django_db


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_healthz_answers_without_login(client):
    response = client.get("/healthz")
    assert response.status_code == 200 and response.json() == {"status": "ok"}


def test_readyz_is_not_ready_without_a_search_index(client):
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not_ready" and body["checks"]["search_index"] == "not_built"
    assert body["checks"]["database"] == "ok"


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="a real refusal: a Postgres role allowed no connection")
def test_readyz_without_a_database_says_so_and_not_that_the_index_is_missing(client):
    with connections_refused():
        response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not_ready"
    assert body["checks"]["database"] == "unavailable" and body["checks"]["search_index"] == "unknown"


@pytest.mark.slow
def test_readyz_is_ready_with_an_index_and_the_model(client, encoder_loaded, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        index_rebuild()
    response = client.get("/readyz")
    assert response.status_code == 200, response.json()
    assert response.json() == {
        "status": "ready",
        "checks": {"database": "ok", "search_index": "ok", "model": "ok"}
        | ({"cache": "ok"} if "cache" in response.json()["checks"] else {}),
    }


@pytest.mark.slow
def test_readyz_reports_an_unreachable_redis(client, encoder_loaded, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        index_rebuild()
    dead = f"redis://127.0.0.1:{_closed_port()}/0"
    caches = {"default": {"BACKEND": "catalog.rediscache.ScoutRedisCache", "LOCATION": dead}}
    with override_settings(REDIS_URL=dead, CACHES=caches):
        response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["checks"]["cache"] == "unavailable" and body["status"] == "not_ready"
    text = json.dumps(body)
    assert "127.0.0.1" not in text and "redis://" not in text  # names the check, not the configuration


@pytest.fixture
def encoder_loaded():
    from search.encoder import encoder_get

    return encoder_get()


def test_readyz_probes_share_the_processes_redis_connection(redis_connects, rf):
    """The readiness probe's cache check used Django's ``cache``, kept per context: under ASGI every request is a
    context of its own (here: a new, empty one each), so every probe built a backend and opened a Redis connection
    (an orchestrator probes every few seconds, on every replica). It now asks the process's one backend."""
    probes = [contextvars.Context().run(readyz, rf.get("/readyz")) for _ in range(6)]

    assert [json.loads(probe.content)["checks"]["cache"] for probe in probes] == ["ok"] * 6
    assert len(redis_connects) == 1
