"""A token stored with more than MAX_TOKEN_SERVER_SCOPES servers (minted over REST before the limit) is refused on
/mcp, and its holder is told why (redteam33): it slowed each of its searches 1.6-2x at 12,000 servers."""

from __future__ import annotations

import pytest

from .conftest import challenge_params, gateway_db, make_token, make_user, modern_request, raw_post

pytestmark = [gateway_db, pytest.mark.slow]


def test_a_token_naming_more_servers_than_the_limit_is_refused_and_told_why(gateway):
    from governance.constants import MAX_TOKEN_SERVER_SCOPES
    from governance.models import ApiToken

    raw = make_token(make_user("gw_wide"), ["discover", "server:s0"])
    wide = ["discover", *(f"server:s{n}" for n in range(MAX_TOKEN_SERVER_SCOPES + 1))]
    ApiToken.objects.filter(display_prefix=raw[:10]).update(scopes=wide)  # as minted before the limit
    response = raw_post(gateway, modern_request("tools/list"), token=raw)
    assert response.status_code == 401
    said = "The access token names more servers than a token may now: make a new one"
    assert challenge_params(response)["error_description"] == said
    assert response.json() == {"error": "invalid_token", "error_description": said}
