"""A REST request whose body is past Django's DATA_UPLOAD_MAX_MEMORY_SIZE (redteam31, T13/C1-7): over the served ASGI
app Django refuses to read it (RequestDataTooBig), and the API answered that with a 500 and a traceback logged per
request, at the caller's own rate; now a 413 in the API's error shape, and nothing done."""

import json
import logging
from datetime import timedelta

import httpx
from django.utils import timezone

from .conftest import gateway_db, make_token, make_user

pytestmark = gateway_db


def test_a_body_past_the_upload_limit_is_a_413_not_a_500(gateway, settings, caplog):
    from governance.models import ApiToken

    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 100_000
    member = make_user("gw_member")
    token = make_token(member, ["api", "discover", "execute"])
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    too_big = {
        "name": "copy",
        "scopes": ["discover"] * 30_000,
        "expires_at": (timezone.now() + timedelta(minutes=30)).isoformat(),
    }
    fits = {**too_big, "scopes": ["discover"]}

    with caplog.at_level(logging.ERROR, logger="scout.api"):
        for path, body in (("tokens/", too_big), ("search/", {"query": "x" * 200_000})):
            response = httpx.post(f"{gateway.url}/api/v1/{path}", content=json.dumps(body), headers=headers, timeout=60)
            assert response.status_code == 413, response.text
            assert response.json()["error"]["code"] == "request_too_large"
    assert not [record for record in caplog.records if record.name == "scout.api"]  # no traceback logged
    assert ApiToken.objects.filter(user=member).count() == 1  # nothing minted

    response = httpx.post(f"{gateway.url}/api/v1/tokens/", content=json.dumps(fits), headers=headers, timeout=60)
    assert response.status_code == 201, response.text
