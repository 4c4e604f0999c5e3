"""A token names at most MAX_TOKEN_SERVER_SCOPES servers (redteam33): every search and call of a token filters on its
servers, so a token naming thousands (any token with the api scope mints one) slowed each of its searches. Refused at
creation over REST; a token stored with more before the limit is refused when it is used."""

from datetime import timedelta

from django.utils import timezone

from governance.constants import MAX_TOKEN_SERVER_SCOPES
from tests.api.conftest import api_db, error_of, make_token

pytestmark = api_db


def _servers(count: int) -> list[str]:
    return [f"server:s{n}" for n in range(count)]


def _mint(api, caller: str, scopes: list[str]):
    expires = (timezone.now() + timedelta(days=1)).isoformat()
    return api.post("tokens/", token=caller, json={"name": "wide", "scopes": scopes, "expires_at": expires})


def test_a_token_naming_more_servers_than_the_limit_is_refused_with_a_clear_error(api, member):
    from governance.models import ApiToken

    caller = make_token(member, ["api", "discover"], days=30)
    refused = _mint(api, caller, ["api", "discover", *_servers(MAX_TOKEN_SERVER_SCOPES + 1)])
    assert refused.status_code == 400, refused.text
    assert f"at most {MAX_TOKEN_SERVER_SCOPES} servers" in " ".join(error_of(refused)["fields"]["scopes"])
    too_long = _mint(api, caller, ["api", "server:" + "s" * 201])  # longer than any server's slug
    assert too_long.status_code == 400 and "scopes" in error_of(too_long)["fields"]
    assert ApiToken.objects.count() == 1  # the caller's own only
    at_limit = _mint(api, caller, ["api", "discover", *_servers(MAX_TOKEN_SERVER_SCOPES)])
    assert at_limit.status_code == 201, at_limit.text
    assert api.get("tools/", token=at_limit.json()["token"]).status_code == 200


def test_a_token_stored_with_more_servers_before_the_limit_is_refused(api, member):
    from governance.models import ApiToken

    raw = make_token(member, ["api", "discover", "server:s0"], days=30)
    ApiToken.objects.filter(user=member).update(scopes=["api", "discover", *_servers(12_000)])  # as stored before
    refused = api.get("tools/", token=raw)
    assert refused.status_code == 401 and error_of(refused)["message"] == "Invalid or expired token."
