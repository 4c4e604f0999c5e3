"""A token lives at most SCOUT_TOKEN_MAX_DAYS from its creation (redteam35, T16/C1-2): an expiry in 9999 was
accepted from anyone making their own token (admin or REST), so a leaked one was a secret for ever. A later expiry is
refused when the token is made; a token older than the limit (made before it, or the limit lowered) is refused as
expired."""

from datetime import timedelta

import httpx
from django.utils import timezone

from tests.api.conftest import api_db, http, make_token, session_cookies

pytestmark = api_db


def _mint(api, cookies, expires_at) -> httpx.Response:
    body = {"name": "forever", "scopes": ["api", "discover"], "expires_at": expires_at.isoformat()}
    headers = {"X-CSRFToken": cookies["csrftoken"]}
    return http("POST", f"{api.base}/api/v1/tokens/", cookies=cookies, headers=headers, json=body, timeout=30)


def test_an_expiry_past_the_limit_is_refused_when_the_token_is_made(api, owner, settings):
    from governance.models import ApiToken

    settings.SCOUT_TOKEN_MAX_DAYS = 365
    cookies = session_cookies(owner)
    for far in (timezone.now().replace(year=9999), timezone.now() + timedelta(days=366)):
        refused = _mint(api, cookies, far)
        assert refused.status_code == 400, refused.text
        assert "at most 365 days" in refused.json()["error"]["fields"]["expires_at"][0]
    assert not ApiToken.objects.exists()
    assert _mint(api, cookies, timezone.now() + timedelta(days=364)).status_code == 201


def test_a_token_older_than_the_limit_is_refused_as_expired(api, owner, settings):
    from governance.models import ApiToken

    settings.SCOUT_TOKEN_MAX_DAYS = 365
    raw = make_token(owner, ["api", "discover"], days=30)
    assert api.get("tokens/", token=raw).status_code == 200
    # Made before the limit with an expiry years ahead, 366 days ago.
    ApiToken.objects.update(
        created_at=timezone.now() - timedelta(days=366), expires_at=timezone.now() + timedelta(days=3000)
    )
    assert api.get("tokens/", token=raw).status_code == 401
    settings.SCOUT_TOKEN_MAX_DAYS = 0  # no limit: its own expiry alone
    assert api.get("tokens/", token=raw).status_code == 200
