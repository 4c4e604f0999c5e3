"""/metrics: Prometheus text, never public, counting what happened."""

import pytest
from django.db import connection
from prometheus_client.parser import text_string_to_metric_families

from catalog.choices import Transport
from catalog.models import Server
from catalog.services.sync import server_sync
from tests.db_refusal import connections_refused

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


@pytest.mark.django_db(transaction=True)
@pytest.mark.skipif(connection.vendor != "postgresql", reason="a real refusal: a Postgres role allowed no connection")
def test_without_a_database_the_counters_are_still_served_and_say_it_is_down(client):
    server = Server.objects.create(slug="gone", name="gone", transport=Transport.STDIO, command="scout-no-such-cmd")
    server_sync(server_pk=server.pk, trigger="test")
    failed = value(client.get("/metrics").content.decode(), "scout_syncs_total", status="failed")
    assert failed >= 1
    with connections_refused():
        response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert value(text, "scout_database_up") == 0
    assert value(text, "scout_syncs_total", status="failed") == failed  # this process's counters, still served
    assert "scout_upstream_servers" not in text and "scout_approvals_pending" not in text
    assert value(client.get("/metrics").content.decode(), "scout_database_up") == 1


@pytest.mark.django_db(transaction=True)
def test_behind_a_proxy_the_allowed_networks_judge_the_client_not_the_proxy(live_server, settings):
    """With a reverse proxy in front (SCOUT_API_NUM_PROXIES=1, as the README's rate limits ask), every request came
    from the proxy's address, on the same host a loopback one the default allows: /metrics (every tenant's server
    slugs in the upstream counters, the pending approvals) was anyone's. The client's address is now the one the
    proxy wrote, as for the rate limits; a scrape straight from the host (no proxy, no header) is still allowed."""
    import httpx

    from mcpgateway.metrics import UPSTREAM_BREAKER_OPENED

    UPSTREAM_BREAKER_OPENED.labels(server="tenant-b-payroll").inc()
    settings.SCOUT_METRICS_TOKEN = ""
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}

    def scrape(**headers: str) -> httpx.Response:
        return httpx.get(f"{live_server.url}/metrics", headers=headers, timeout=30)

    outsider = scrape(**{"X-Forwarded-For": "203.0.113.9"})  # the proxy (on 127.0.0.1) forwarding an outsider
    assert outsider.status_code == 403 and "tenant-b-payroll" not in outsider.text
    spoofed = scrape(**{"X-Forwarded-For": "127.0.0.1, 203.0.113.9"})  # the outsider's own header claims loopback
    assert spoofed.status_code == 403
    assert "tenant-b-payroll" in scrape(**{"X-Forwarded-For": "127.0.0.1"}).text  # a scraper on the host, proxied
    assert "tenant-b-payroll" in scrape().text  # straight to Scout from the host
