"""/metrics: Prometheus text, never public, counting what happened."""

import pytest
from prometheus_client.parser import text_string_to_metric_families

from catalog.choices import Transport
from catalog.models import Server
from catalog.services.sync import server_sync

pytestmark = pytest.mark.django_db


def samples(text: str) -> dict[tuple[str, tuple], float]:
    found = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return found


def value(text: str, name: str, **labels: str) -> float:
    return samples(text).get((name, tuple(sorted(labels.items()))), 0.0)


def test_refused_from_a_network_that_is_not_allowed(client, settings):
    settings.SCOUT_METRICS_ALLOWED_NETWORKS = ["10.0.0.0/8"]
    settings.SCOUT_METRICS_TOKEN = ""
    response = client.get("/metrics")  # the test client comes from 127.0.0.1
    assert response.status_code == 403 and b"scout_" not in response.content


def test_a_bearer_token_opens_it_from_anywhere(client, settings):
    settings.SCOUT_METRICS_ALLOWED_NETWORKS = []
    settings.SCOUT_METRICS_TOKEN = "metrics-secret-value"
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer wrong").status_code == 403
    response = client.get("/metrics", HTTP_AUTHORIZATION="Bearer metrics-secret-value")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")


def test_loopback_is_allowed_by_default_and_counts_a_sync(client):
    server = Server.objects.create(slug="gone", name="gone", transport=Transport.STDIO, command="scout-no-such-cmd")
    before = value(client.get("/metrics").content.decode(), "scout_syncs_total", status="failed")
    server_sync(server_pk=server.pk, trigger="test")
    text = client.get("/metrics").content.decode()
    assert value(text, "scout_syncs_total", status="failed") == before + 1
    assert value(text, "scout_sync_failures_24h") == 1
    assert value(text, "scout_upstream_servers", status="unavailable") == 1
    assert value(text, "scout_approvals_pending") == 0
