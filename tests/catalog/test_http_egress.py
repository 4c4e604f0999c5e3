"""Streamable HTTP MCP upstreams go only where SCOUT_UPSTREAM_ALLOWED_HOSTS allows (SSRF), as OpenAPI services do.

An operator could point an HTTP MCP server at 169.254.169.254 (cloud metadata) or an internal host, and Scout's test
connection, sync and every call reached it. The URL's host is now checked when the server is registered, and its
resolved address at every connection (test connection, sync, execution all connect through
``catalog.upstream.open_session``), which is then the address the session talks to: a second DNS answer cannot move
it (DNS rebinding). Loopback and private addresses pass only when their network is listed (the tests list
127.0.0.1/32 for their local servers, as OpenAPI's tests do)."""

import httpx
import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse
from mcp.server.transport_security import TransportSecuritySettings

from catalog import upstream
from catalog.choices import SyncStatus
from catalog.models import Server
from catalog.services.sync import server_sync
from tests.catalog.servers.http_mcp import serve_forward_proxy, serve_http
from tests.governance.admin.test_other_tenants_server_by_id import listener  # noqa: F401 - a fixture

pytestmark = pytest.mark.django_db
METADATA_URL = "http://169.254.169.254/latest/meta-data/"


def _form(url: str) -> dict:
    data = {"slug": "probe", "name": "Probe", "environment": "production", "transport": "http", "url": url}
    data.update({"command": "", "args": "[]", "env_vars": "[]", "header_env": "{}", "status": "active"})
    for prefix in ("group_grants", "user_grants", "sync_runs"):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    return data


def test_an_http_server_at_a_host_not_listed_is_not_registered(client, superuser, settings, live_server):
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["mcp.example.com"]
    client.force_login(superuser)
    refused = client.post(reverse("admin:catalog_server_add"), _form(METADATA_URL))
    assert refused.status_code == 200 and "not in SCOUT_UPSTREAM_ALLOWED_HOSTS" in refused.content.decode()
    from tests.api.conftest import make_token

    settings.SCOUT_API_RATE = "10000/minute"
    token = make_token(superuser, ["api"])
    body = {"slug": "probe", "name": "P", "transport": "http", "url": METADATA_URL}
    response = httpx.post(
        f"{live_server.url}/api/v1/servers/", json=body, headers={"Authorization": f"Bearer {token}"}, timeout=60
    )
    assert response.status_code == 400, response.text
    assert not Server.objects.filter(slug="probe").exists()
    assert client.post(reverse("admin:catalog_server_add"), _form("https://mcp.example.com/mcp")).status_code == 302


def test_test_connection_and_sync_send_nothing_to_a_host_not_listed(client, superuser, settings, listener):  # noqa: F811
    url, seen = listener
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = []  # the default: no HTTP upstream is reachable
    client.force_login(superuser)
    page = client.post(reverse("admin:catalog_server_test_connection"), _form(url)).content.decode()
    assert "not in SCOUT_UPSTREAM_ALLOWED_HOSTS" in page
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["127.0.0.1/32"]
    server = Server.objects.create(slug="probe", name="Probe", transport="http", url=url)  # registered while allowed
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["mcp.example.com"]  # then no longer
    run = server_sync(server_pk=server.pk, trigger="test")
    assert run.status == SyncStatus.FAILED
    assert "URL refused: host 127.0.0.1 is not in SCOUT_UPSTREAM_ALLOWED_HOSTS" in run.error
    assert seen == []  # nothing reached the host


def test_calls_connect_only_to_a_listed_address_and_a_name_may_not_smuggle_loopback(settings, listener):  # noqa: F811
    url, seen = listener
    server = Server(slug="up", transport="http", url=url, header_env={})
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["169.254.0.0/16"]
    with pytest.raises(upstream.UpstreamError, match="not in SCOUT_UPSTREAM_ALLOWED_HOSTS") as refused:
        upstream.run_async(lambda: upstream.call_tool(server, "add", {"a": 1, "b": 2}, timeout=5))
    assert refused.value.kind == "config"
    # A listed name that resolves to a loopback address is refused unless that network is listed too.
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["localhost"]
    server.url = url.replace("127.0.0.1", "localhost")
    with pytest.raises(upstream.UpstreamError, match="resolves to 127.0.0.1"):
        upstream.run_async(lambda: upstream.call_tool(server, "add", {"a": 1, "b": 2}, timeout=5))
    assert seen == []


# Loopback and the metadata address as a browser or the C library reads them, though Python's ``ipaddress`` does not
# (hex, one number, octal, short forms), and IPv6 forms that carry them.
LOOPBACK_SPELLINGS = ["0x7f000001", "2130706433", "0177.0.0.1", "127.1", "0x7f.1", "[::ffff:7f00:1]", "[::127.0.0.1]"]
METADATA_SPELLINGS = ["0xa9fea9fe", "2852039166", "0251.0376.0251.0376", "[::ffff:a9fe:a9fe]", "[64:ff9b::a9fe:a9fe]"]


@pytest.mark.parametrize("host", LOOPBACK_SPELLINGS + METADATA_SPELLINGS)
def test_an_address_spelt_otherwise_is_refused_at_registration_and_at_every_call(settings, listener, host):  # noqa: F811
    """The listed networks hold neither loopback nor the metadata range; a spelling of either is not a name on the
    list either. The loopback spellings are aimed at a real local server's port (the C library connects them to
    127.0.0.1): it is never reached, neither when registered nor when called."""
    from catalog.services.servers import server_create

    port = int(listener[0].rsplit(":", 1)[1].split("/")[0])
    url, seen = f"http://{host}:{port}/mcp", listener[1]
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["10.0.0.0/8", "mcp.example.com", "*.example.com"]
    with pytest.raises(ValidationError) as refused:
        server_create(slug="probe", name="Probe", transport="http", url=url)
    assert refused.value.message_dict["url"]  # not a valid URL for Django, or not on the list
    assert not Server.objects.filter(slug="probe").exists()
    server = Server(slug="up", transport="http", url=url, header_env={})  # as if stored before the list changed
    with pytest.raises(upstream.UpstreamError, match="URL refused") as failed:
        upstream.run_async(lambda: upstream.call_tool(server, "add", {"a": 1, "b": 2}, timeout=5))
    assert failed.value.kind == "config"
    assert seen == []


@pytest.mark.parametrize(
    "answer",
    [
        "169.254.169.254",
        "10.0.0.5",
        "::ffff:169.254.169.254",
        "64:ff9b::a9fe:a9fe",
        # The IPv4-translated form (SIIT, RFC 2765/6145: ::ffff:0:a.b.c.d), which Python calls global (redteam46).
        "::ffff:0:a9fe:a9fe",
        "::ffff:0:7f00:1",
        "fd00::1",
        "::1",
    ],
)
def test_a_listed_name_resolving_to_a_private_or_metadata_address_is_refused_at_call_time(
    settings, monkeypatch, answer
):
    """A name on the list (registered while it resolved to a public address) whose DNS answer is now internal: the
    call is refused before anything is sent, whichever form the answer takes."""
    from catalog import egress

    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["mcp.example.com"]
    monkeypatch.setattr(egress, "system_resolver", lambda host, port: [answer])
    server = Server(slug="up", transport="http", url="http://mcp.example.com/mcp", header_env={})
    with pytest.raises(upstream.UpstreamError, match="private, loopback or link-local") as refused:
        upstream.run_async(lambda: upstream.call_tool(server, "add", {"a": 1, "b": 2}, timeout=5))
    assert refused.value.kind == "config"


def test_a_session_talks_to_the_address_checked_when_it_connected(settings, monkeypatch):
    """The session is pinned to the checked address: here the name resolves (for the check) only through Scout's
    resolver, as if DNS answered once and then changed; were the HTTP client to ask DNS again, it would fail."""
    from catalog import egress

    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["rebind.test", "127.0.0.0/8"]
    monkeypatch.setattr(egress, "system_resolver", lambda host, port: ["127.0.0.1"] if host == "rebind.test" else [])
    anyhost = TransportSecuritySettings(enable_dns_rebinding_protection=False)  # it answers Host: rebind.test too
    with serve_http(transport_security=anyhost) as running:
        server = Server(slug="up", transport="http", url=running.url.replace("127.0.0.1", "rebind.test"), header_env={})
        result = upstream.run_async(lambda: upstream.call_tool(server, "add", {"a": 2, "b": 3}, timeout=10))
    assert not result.is_error and result.structured_content["result"] == 5


@pytest.mark.parametrize("status", [301, 302, 307, 308])
@pytest.mark.parametrize("where", ["another port", "loopback spelt in hex", "metadata address"])
def test_a_redirect_from_an_http_server_is_not_followed_to_another_host(
    settings,
    monkeypatch,
    listener,  # noqa: F811
    status,
    where,
):
    """The upstream answers with a redirect to another origin (same listed address, another port, or that port at
    ``0x7f000001``, which the C library connects to 127.0.0.1, or the cloud metadata address): nothing is sent there
    and the call fails (the server's headers, its credentials, stay home). The MCP SDK follows only redirects
    within the origin today; here it follows any, so what is tested is Scout's own pinned transport."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    import mcp.shared._httpx_utils as sdk_http

    monkeypatch.setattr(sdk_http, "next_request_within_origin", lambda response: response.next_request)
    elsewhere, seen = listener
    if where == "loopback spelt in hex":
        elsewhere = elsewhere.replace("127.0.0.1", "0x7f000001")
    elif where == "metadata address":
        elsewhere = METADATA_URL

    class Redirect(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's name
            self.send_response(status)
            self.send_header("Location", elsewhere)  # another origin: same address, another port
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST  # noqa: N815

        def log_message(self, *args):
            pass

    redirector = ThreadingHTTPServer(("127.0.0.1", 0), Redirect)
    threading.Thread(target=redirector.serve_forever, daemon=True).start()
    try:
        settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["127.0.0.0/8"]
        url = f"http://127.0.0.1:{redirector.server_address[1]}/mcp"
        server = Server(slug="up", transport="http", url=url, header_env={})
        with pytest.raises(upstream.UpstreamError) as refused:
            upstream.run_async(lambda: upstream.call_tool(server, "add", {"a": 1, "b": 2}, timeout=5))
    finally:
        redirector.shutdown()
    assert "is not the server's checked origin" in str(refused.value), str(refused.value)
    assert seen == []


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:80/mcp", "https://127.0.0.1:443/mcp", "http://[::FFFF:127.0.0.1]/mcp"]
)
def test_a_url_spelling_its_default_port_or_an_upper_case_address_still_reaches_its_own_origin(url):
    """httpx drops a default port and keeps an address's case; the check's origin had the port and lower case, so
    every request of such a server was refused as going to another origin."""
    import anyio
    import httpx2

    from catalog.egress import egress_check

    target = egress_check(url, allowed=["127.0.0.0/8"])
    reached: list[str] = []

    def far_side(request: httpx2.Request) -> httpx2.Response:
        reached.append(f"{request.url.host} {request.headers['host']}")
        return httpx2.Response(200)

    transport = upstream._PinnedTransport(target)
    transport._inner = httpx2.MockTransport(far_side)  # the wire: what the pinned transport hands on

    async def post() -> int:
        async with httpx2.AsyncClient(transport=transport) as client:
            return (await client.post(url, content=b"{}")).status_code

    assert anyio.run(post) == 200
    assert reached == [f"127.0.0.1 {target.host_header}"]


def test_calls_and_the_idle_probe_go_straight_to_the_checked_address_never_through_a_proxy(settings, monkeypatch):
    """upstream11: an HTTP upstream's session (its handshake, listing, calls, closing) and the idle probe before a call
    (``reachable``) both go to the address checked at connection, never through an HTTP(S)_PROXY from the environment:
    a proxy would choose the address the allow-list judged (and read every call). Checked with a real forward proxy,
    which would pass the session on if asked: it is asked nothing."""
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["127.0.0.1/32"]
    with serve_forward_proxy() as (proxy_url, through_proxy), serve_http() as real:
        for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
            monkeypatch.setenv(name, proxy_url)
        for name in ("NO_PROXY", "no_proxy"):
            monkeypatch.delenv(name, raising=False)
        httpx.post(real.url, json={}, timeout=30)  # a client that reads the environment (httpx's default)...
        assert through_proxy == [f"POST {real.url}"]  # ...is passed on by the proxy
        through_proxy.clear()
        server = Server(slug="direct", name="Direct", transport="http", url=real.url)

        async def session_and_probe() -> tuple[str, bool]:
            async with upstream.open_session(server) as session:
                await session.list_tools()
                answer = await session.call_tool("greet", {"name": "Ann"}, 30)
                return answer.content[0].text, await session.reachable(5)

        assert upstream.run_async(session_and_probe) == ("Hello, Ann!", True)
    assert through_proxy == []
