"""Upstream hosts: an OpenAPI service's URLs are checked against SCOUT_UPSTREAM_ALLOWED_HOSTS when it is registered or
edited (as an HTTP MCP server's URL is), a host lookup is refused once SCOUT_UPSTREAM_DNS_TIMEOUT passes (the system
resolver has no limit of its own), and an OpenAPI service's calls reuse the address checked for an earlier call
instead of looking its host up every time."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from django.core.exceptions import ValidationError

from catalog import egress, upstream
from catalog.models import Server, Tool
from catalog.services.openapi_documents import server_openapi_document_set
from catalog.services.servers import server_update
from catalog.services.sync import server_sync
from tests.catalog.test_openapi_admin import _add

from .openapi_service import TOKEN_ENV, PetService, document, start_pet_service

pytestmark = pytest.mark.django_db


@pytest.fixture(scope="module")
def pet_service() -> Iterator[tuple[Any, PetService]]:
    server, service = start_pet_service()
    yield server, service
    server.stop()


def test_an_openapi_service_at_a_host_not_listed_is_not_registered(client, superuser, settings):
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["api.example.com"]
    client.force_login(superuser)
    upload = json.dumps(document()).encode()
    page = _add(client, "http://169.254.169.254/latest", upload)
    assert page.status_code == 200
    errors = page.context["adminform"].form.errors
    assert errors["base_url"] == [
        "host 169.254.169.254 is not in SCOUT_UPSTREAM_ALLOWED_HOSTS (the hosts Scout may connect to): correct the "
        "URL, or ask whoever runs Scout to list this host there and restart Scout"
    ]  # the one reason (and what to do), not "needs a base URL" as well
    page = _add(client, "https://api.example.com/v1", b"", openapi_url="http://10.0.0.5/openapi.json")
    assert "not in SCOUT_UPSTREAM_ALLOWED_HOSTS" in " ".join(page.context["adminform"].form.errors["openapi_url"])
    assert not Server.objects.exists()
    assert _add(client, "https://api.example.com/v1", upload).status_code == 302


def test_editing_checks_a_changed_url_and_leaves_a_stored_one_alone(settings):
    server = Server.objects.create(slug="pets", name="Pets", transport="openapi", base_url="https://old.example/v1")
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["api.example.com"]  # old.example left the list since
    server_update(server=server, name="Pet store")  # its other fields stay editable
    with pytest.raises(ValidationError) as refused:
        server_update(server=server, transport="openapi", description="moved")  # a transport set: every URL
    assert "SCOUT_UPSTREAM_ALLOWED_HOSTS" in " ".join(refused.value.message_dict["base_url"])
    assert Server.objects.get(pk=server.pk).name == "Pet store"


@pytest.fixture
def stuck_resolver(settings, monkeypatch) -> Iterator[threading.Event]:
    """The system resolver hangs until the test ends (as one does when a DNS server drops queries)."""
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["mcp.example.com"]
    settings.SCOUT_UPSTREAM_DNS_TIMEOUT = 0.2
    release = threading.Event()

    def resolver(host: str, port: int) -> list[str]:
        release.wait(30)
        return ["93.184.216.34"]

    monkeypatch.setattr(egress, "system_resolver", resolver)
    yield release
    release.set()


def test_a_lookup_that_hangs_is_refused_naming_the_setting(stuck_resolver):
    with pytest.raises(egress.EgressRefused, match=r"did not resolve within 0\.2 s \(SCOUT_UPSTREAM_DNS_TIMEOUT\)"):
        egress.egress_check("https://mcp.example.com/mcp")
    server = Server(slug="probe", name="Probe", transport="http", url="https://mcp.example.com/mcp")
    with pytest.raises(upstream.UpstreamError, match="SCOUT_UPSTREAM_DNS_TIMEOUT") as refused:
        upstream.list_tools(server, connect_timeout=60)
    assert refused.value.kind == "config"  # refused before anything was sent, not a 60 s connect timeout


def test_lookups_of_a_host_whose_dns_hangs_leave_other_hosts_lookups_alone(settings, monkeypatch):
    """Eight calls to one upstream whose DNS hangs held every thread of the lookup pool: every other upstream's
    lookups then queued and were refused too (one broken or hostile name stopped all egress). A host's lookup in
    flight is joined, so that host holds one thread."""
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["stuck.example.com", "fine.example.com"]
    settings.SCOUT_UPSTREAM_DNS_TIMEOUT = 0.3
    release = threading.Event()
    stuck_lookups = []

    def resolver(host: str, port: int) -> list[str]:
        if host == "stuck.example.com":
            stuck_lookups.append(host)
            release.wait(30)
        return ["93.184.216.34"]

    monkeypatch.setattr(egress, "system_resolver", resolver)
    refused: list[BaseException] = []

    def call() -> None:
        try:
            egress.egress_check("https://stuck.example.com/mcp")
        except egress.EgressRefused as exc:
            refused.append(exc)

    try:
        callers = [threading.Thread(target=call) for _ in range(12)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        assert len(refused) == 12
        target = egress.egress_check("https://fine.example.com/mcp")  # another host still resolves
        assert str(target.address) == "93.184.216.34" and len(stuck_lookups) == 1
    finally:
        release.set()


def test_an_openapi_services_calls_reuse_the_address_checked_for_an_earlier_call(
    pet_service, settings, monkeypatch, transactional_db
):
    from mcpgateway.upstreams import UpstreamPool

    live, service = pet_service
    port = live.url.rsplit(":", 1)[1]
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["pets.test", "127.0.0.1/32"]
    monkeypatch.setenv(TOKEN_ENV, "a-token")
    service.token = "a-token"
    lookups: list[str] = []

    def resolver(host: str, port: int) -> list[str]:
        lookups.append(host)
        return ["127.0.0.1"]

    monkeypatch.setattr(egress, "system_resolver", resolver)
    server = Server.objects.create(
        slug="pets",
        name="pets",
        transport="openapi",
        base_url=f"http://pets.test:{port}",
        openapi_credentials=[{"type": "bearer", "env": TOKEN_ENV}],
    )
    server_openapi_document_set(server=server, text=json.dumps(document()))
    server_sync(server_pk=server.pk)
    tool = Tool.objects.get(server=server, name="listPets")
    service.requests.clear()

    async def calls() -> list[Any]:
        pool = UpstreamPool()
        async with pool.running():
            return [
                await pool.call(server=server, tool_name="listPets", arguments={}, timeout=30, tool=tool)
                for _ in range(3)
            ]

    results = anyio.run(calls)
    assert [result.is_error for result in results] == [False, False, False]
    assert len(service.calls()) == 3 and {call.headers["host"] for call in service.calls()} == {f"pets.test:{port}"}
    assert lookups == ["pets.test"]  # one lookup for three calls


def test_many_names_under_a_wildcard_whose_dns_hangs_leave_other_hosts_lookups_alone(settings, monkeypatch):
    """Joining a host's lookup in flight bounds one name; a wildcard entry admits any number of them. Names under
    one wildcard (say a tenant's own zone, whose DNS server drops queries) each took a thread of the pool until all
    eight hung, and every other upstream's lookup was refused. Lookups under one wildcard entry now hold at most
    WILDCARD_LOOKUPS threads; the others wait for one of them and are refused at the timeout as before."""
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["*.tenant.example", "fine.example.com"]
    settings.SCOUT_UPSTREAM_DNS_TIMEOUT = 0.3
    release = threading.Event()
    stuck_lookups = []

    def resolver(host: str, port: int) -> list[str]:
        if host.endswith(".tenant.example"):
            stuck_lookups.append(host)
            release.wait(30)
        return ["93.184.216.34"]

    monkeypatch.setattr(egress, "system_resolver", resolver)
    refused: list[BaseException] = []

    def call(n: int) -> None:
        try:
            egress.egress_check(f"https://h{n}.tenant.example/mcp")
        except egress.EgressRefused as exc:
            refused.append(exc)

    try:
        callers = [threading.Thread(target=call, args=(n,)) for n in range(12)]
        for caller in callers:
            caller.start()
        for caller in callers:
            caller.join()
        assert len(refused) == 12 and all("did not resolve within 0.3 s" in str(exc) for exc in refused)
        target = egress.egress_check("https://fine.example.com/mcp")  # another host still resolves
        assert str(target.address) == "93.184.216.34"
        assert len(stuck_lookups) == egress.WILDCARD_LOOKUPS
    finally:
        release.set()


def test_a_burst_of_names_under_a_wildcard_all_resolve(settings, monkeypatch):
    """The bound makes lookups under one wildcard wait their turn, never refuses them while DNS answers."""
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["*.corp.example"]
    settings.SCOUT_UPSTREAM_DNS_TIMEOUT = 5
    running, most = [0], [0]
    lock = threading.Lock()

    def resolver(host: str, port: int) -> list[str]:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        threading.Event().wait(0.02)
        with lock:
            running[0] -= 1
        return ["93.184.216.34"]

    monkeypatch.setattr(egress, "system_resolver", resolver)
    resolved: list[str] = []
    callers = [
        threading.Thread(
            target=lambda n=n: resolved.append(str(egress.egress_check(f"https://s{n}.corp.example/").address))
        )
        for n in range(16)
    ]
    for caller in callers:
        caller.start()
    for caller in callers:
        caller.join()
    assert resolved == ["93.184.216.34"] * 16
    assert most[0] <= egress.WILDCARD_LOOKUPS
