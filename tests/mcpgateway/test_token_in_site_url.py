"""A Scout token written in the address of any page but /mcp (the REST API, the admin, the landing page) is refused
and kept out of the access log (redteam33, C1-3 beyond /mcp): a client that sends its token as ``?token=`` put the
secret in the log line of every request, which /mcp already refused (EdgeGuard)."""

from __future__ import annotations

from urllib.parse import quote

import httpx
import pytest

from .conftest import gateway_db, make_token, make_user, uvicorn_lines, wait_for_access_line

pytestmark = [gateway_db, pytest.mark.slow]

MESSAGE = "A Scout token does not belong in an address, where it is logged: send it in the Authorization header"


@pytest.mark.parametrize(
    "path",
    ["/api/v1/tools/?token={raw}", "/api/v1/tools/?q=x&access_token={quoted}", "/admin/login/?next={raw}", "/?t={raw}"],
)
def test_a_token_in_a_pages_address_is_refused_and_never_logged(gateway, path):
    raw = make_token(make_user("url_token"), ["api", "discover"])
    with uvicorn_lines() as lines:
        response = httpx.get(gateway.url + path.format(raw=raw, quoted=quote(raw, safe="")), timeout=10)
        assert response.status_code == 400 and raw not in response.text
        assert response.json() == {"error": {"code": "token_in_address", "message": MESSAGE, "fields": {}}}
        assert response.headers["x-content-type-options"] == "nosniff"
        wait_for_access_line(lines, f"GET {path.split('?')[0]}", "400")
        assert not any(raw[6:] in line for line in lines)


def test_other_addresses_and_a_token_in_the_header_still_work(gateway):
    raw = make_token(make_user("url_token_ok"), ["api", "discover"])
    assert httpx.get(f"{gateway.url}/api/v1/tools/?q=scout_abc", headers={"Authorization": f"Bearer {raw}"}).is_success
    assert httpx.get(f"{gateway.url}/admin/login/?next=/admin/", timeout=10).status_code == 200


@pytest.mark.parametrize("path", ["/mcp/{raw}", "/api/v1/tools/{raw}/", "/admin/{escaped}/", "/{twice}"])
def test_a_token_in_a_pages_path_is_refused_and_never_logged(gateway, path):
    """redteam35: a token in the path (a client configured with ``https://scout/mcp/<token>``, as some gateways take
    it) was answered 404 and written whole in uvicorn's access line and Django's "Not Found" warning."""
    raw = make_token(make_user("path_token"), ["api", "discover"])
    escaped = "".join(f"%{byte:02X}" for byte in raw.encode())
    address = path.format(raw=raw, escaped=escaped, twice=quote(escaped, safe=""))
    with uvicorn_lines() as lines:
        response = httpx.get(gateway.url + address, timeout=10)
        assert response.status_code == 400 and raw not in response.text
        if path.startswith("/mcp/"):  # as /mcp's other edge refusals (EdgeGuard)
            assert response.json() == {"error": "invalid_request", "error_description": MESSAGE}
        else:  # the REST API's one error shape (scoutsite/api/errors.py), every other page alike
            assert response.json() == {"error": {"code": "token_in_address", "message": MESSAGE, "fields": {}}}
        wait_for_access_line(lines, "scout_MASKED", "400")
        assert not any(raw[6:] in line or escaped[18:] in line for line in lines)
