"""Authentication, the "api" scope, the one error shape, throttling and unknown routes, over HTTP."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.api.conftest import api_db, error_of, http, make_token, session_cookies

pytestmark = api_db


def test_anonymous_is_401_with_challenge(api, catalog):
    response = api.get("tools/")
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer")
    assert error_of(response)["code"] == "not_authenticated"


@pytest.mark.parametrize("header", ["Bearer scout_not-a-real-token", "Bearer", "Bearer a b", "Bearer tok\u00e9n"])
def test_bad_tokens_are_one_401(api, catalog, header):
    response = http("GET", f"{api.base}/api/v1/tools/", headers={"Authorization": header.encode("utf-8")})
    assert response.status_code == 401
    assert error_of(response) == {"code": "authentication_failed", "message": "Invalid or expired token.", "fields": {}}


def test_revoked_and_expired_tokens_are_refused(api, catalog, member):
    from django.utils import timezone

    from governance.models import ApiToken
    from governance.services.tokens import api_token_revoke

    token = make_token(member, ["api", "discover"])
    assert api.get("tools/", token=token).status_code == 200
    api_token_revoke(token=ApiToken.objects.get(user=member))
    assert api.get("tools/", token=token).status_code == 401
    other = make_token(member, ["api", "discover"])
    ApiToken.objects.filter(revoked_at__isnull=True).update(expires_at=timezone.now())
    assert api.get("tools/", token=other).status_code == 401


def test_token_without_api_scope_cannot_use_the_api(api, catalog, member):
    """The MCP token of an agent (discover, execute) is refused by the REST API."""
    response = api.get("tools/", token=make_token(member, ["discover", "execute"]))
    assert response.status_code == 403
    error = error_of(response)
    assert error["code"] == "insufficient_scope" and "api" in error["message"]
    assert "list_issues" not in response.text


def _in_a_month() -> str:
    return (timezone.now() + timedelta(days=30)).isoformat()  # within SCOUT_TOKEN_MAX_DAYS


def test_session_reads_and_writes_with_csrf(api, catalog, member):
    member.is_staff = True  # a session comes from the admin's sign-in
    member.save()
    cookies = session_cookies(member)
    listed = http("GET", f"{api.base}/api/v1/tools/", cookies=cookies)
    assert listed.status_code == 200 and listed.json()["count"] == 1
    body = {"name": "from the browser", "scopes": ["api"], "expires_at": _in_a_month()}
    refused = http("POST", f"{api.base}/api/v1/tokens/", cookies=cookies, json=body)
    assert refused.status_code == 403
    assert "CSRF" in error_of(refused)["message"]
    created = http(
        "POST", f"{api.base}/api/v1/tokens/", cookies=cookies, json=body, headers={"X-CSRFToken": cookies["csrftoken"]}
    )
    assert created.status_code == 201, created.text


def test_a_session_whose_person_is_no_longer_staff_is_refused(api, catalog, member, client):
    """T16: a session comes from the admin's sign-in (staff only), and the admin refuses it as soon as its person is
    no longer staff; the REST API went on taking it with every scope (reading, searching, minting tokens of any
    scope) until the session expired (two weeks). It is refused at once there too."""
    from governance.models import ApiToken

    member.is_staff = True
    member.save()
    cookies = session_cookies(member)
    csrf = {"X-CSRFToken": cookies["csrftoken"]}
    body = {"name": "kept", "scopes": ["api", "discover", "execute", "approve"], "expires_at": _in_a_month()}
    assert http("GET", f"{api.base}/api/v1/tools/", cookies=cookies).status_code == 200
    member.is_staff = False
    member.save()
    assert http("GET", f"{api.base}/admin/", cookies=cookies).status_code == 302  # the admin: to the sign-in page
    listed = http("GET", f"{api.base}/api/v1/tools/", cookies=cookies)
    minted = http("POST", f"{api.base}/api/v1/tokens/", cookies=cookies, json=body, headers=csrf)
    assert (listed.status_code, minted.status_code) == (401, 401)
    assert "list_issues" not in listed.text and not ApiToken.objects.filter(name="kept").exists()


def test_throttled_per_token_with_retry_after(api, catalog, member, settings):
    settings.SCOUT_API_RATE = "3/minute"
    token, other = make_token(member, ["api", "discover"]), make_token(member, ["api", "discover"])
    statuses = [api.get("tools/", token=token).status_code for _ in range(4)]
    assert statuses == [200, 200, 200, 429]
    refused = api.get("tools/", token=token)
    assert refused.status_code == 429
    assert int(refused.headers["Retry-After"]) > 0
    assert error_of(refused)["code"] == "throttled"
    # Another token of the same user has its own budget.
    assert api.get("tools/", token=other).status_code == 200


def test_a_persons_tokens_together_get_a_bounded_budget(api, catalog, member, owner, settings):
    """T13: each token had its own budget and any token mints more of its own scopes (POST tokens/), so one person
    with N tokens had N times the rate (a model run per REST search). Their tokens together get
    SCOUT_API_PERSON_TOKENS times the rate; another person keeps theirs."""
    settings.SCOUT_API_RATE, settings.SCOUT_API_PERSON_TOKENS = "2/minute", 2
    from datetime import timedelta

    from django.utils import timezone

    first = make_token(member, ["api", "discover"])
    expires = (timezone.now() + timedelta(hours=12)).isoformat()
    minted = api.post(
        "tokens/", token=first, json={"name": "more", "scopes": ["api", "discover"], "expires_at": expires}
    )
    assert minted.status_code == 201, minted.text
    tokens = [first, minted.json()["token"], *(make_token(member, ["api", "discover"]) for _ in range(2))]
    statuses = [api.get("tools/", token=token).status_code for token in tokens]
    assert statuses == [200, 200, 200, 429]  # the token POST above was the first of the four
    refused = api.get("tools/", token=tokens[3])
    assert refused.status_code == 429 and int(refused.headers["Retry-After"]) > 0
    assert api.get("tools/", token=make_token(owner, ["api", "discover"])).status_code == 200


def test_unknown_route_is_the_json_404(api, catalog, member):
    response = api.get("no-such-thing/", token=make_token(member, ["api", "discover"]))
    assert response.status_code == 404
    assert error_of(response) == {"code": "not_found", "message": "Not found.", "fields": {}}


def test_method_not_allowed_and_malformed_json(api, catalog, member):
    token = make_token(member, ["api", "discover"])
    response = api.request("DELETE", "tools/", token=token)
    assert response.status_code == 405 and error_of(response)["code"] == "method_not_allowed"
    bad = api.post("search/", token=token, content=b"{not json", headers={"Content-Type": "application/json"})
    assert bad.status_code == 400 and error_of(bad)["code"] == "parse_error"
    assert "Traceback" not in bad.text


def test_unexpected_error_is_a_bare_500(api, catalog, member, monkeypatch):
    import governance.api.views as views

    def broken(*args, **kwargs):
        raise RuntimeError("secret internals")

    monkeypatch.setattr(views, "tools_for_api", broken)
    response = api.get("tools/", token=make_token(member, ["api", "discover"]))
    assert response.status_code == 500
    assert error_of(response) == {"code": "server_error", "message": "Internal error.", "fields": {}}
    assert "secret internals" not in response.text and "Traceback" not in response.text


def test_a_spoofed_forwarded_for_header_does_not_escape_the_anonymous_limit(api, settings):
    """DRF keyed the anonymous limit on X-Forwarded-For as the client sent it (NUM_PROXIES unset), so a new value
    on every request was a new client, never limited. Without proxies (the default) the address is the
    connection's; with SCOUT_API_NUM_PROXIES=1 it is the one the proxy added, rightmost."""
    from django.core.cache import cache

    cache.clear()
    settings.SCOUT_API_ANON_RATE = "3/minute"
    spoofed = [
        http("GET", f"{api.base}/api/v1/no-such-thing/", headers={"X-Forwarded-For": f"203.0.113.{n}"})
        for n in range(5)
    ]
    assert [response.status_code for response in spoofed] == [404, 404, 404, 429, 429]
    assert http("GET", f"{api.base}/api/v1/no-such-thing/").status_code == 429  # the same client, the same budget

    cache.clear()
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}

    def through_the_proxy(client: str, claimed: str) -> int:
        forwarded = {"X-Forwarded-For": f"{claimed}, {client}"}
        return http("GET", f"{api.base}/api/v1/no-such-thing/", headers=forwarded).status_code

    assert [through_the_proxy("198.51.100.7", f"10.0.0.{n}") for n in range(4)] == [404, 404, 404, 429]
    assert through_the_proxy("198.51.100.8", "10.0.0.1") == 404  # another client behind the proxy: its own budget
