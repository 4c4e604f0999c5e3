"""/api/v1/tokens/: the caller's own tokens: create (raw value once), list, read, revoke; never beyond scopes."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.api.conftest import api_db, error_of, make_token

pytestmark = api_db


def future(days: float = 7) -> str:
    return (timezone.now() + timedelta(days=days)).isoformat()


def test_create_shows_the_raw_token_once(api, member):
    from governance.models import ApiToken

    caller = make_token(member, ["api", "discover", "execute"], days=30)
    response = api.post(
        "tokens/", token=caller, json={"name": "ci", "scopes": ["api", "discover"], "expires_at": future()}
    )
    assert response.status_code == 201, response.text
    created = response.json()
    raw = created["token"]
    assert raw.startswith("scout_") and created["scopes"] == ["api", "discover"] and created["active"]
    assert "no-store" in response.headers["Cache-Control"].split(", ")
    assert not ApiToken.objects.filter(token_hash__contains=raw[6:]).exists()  # only a hash is stored
    # The new token works, and the raw value never appears again.
    assert api.get("tools/", token=raw).status_code == 200
    listed = api.get("tokens/", token=caller)
    detail = api.get(f"tokens/{created['id']}/", token=caller)
    for later in (listed, detail):
        assert later.status_code == 200 and raw not in later.text and raw[6:20] not in later.text
    assert "token" not in detail.json()
    assert listed.json()["count"] == 2


def test_only_own_tokens(api, member, outsider):
    mine = make_token(member, ["api"])
    make_token(outsider, ["api"])
    from governance.models import ApiToken

    theirs = ApiToken.objects.get(user=outsider)
    body = api.get("tokens/", token=mine).json()
    assert body["count"] == 1
    unknown = api.get("tokens/999999/", token=mine)
    other = api.get(f"tokens/{theirs.pk}/", token=mine)
    assert unknown.status_code == 404 and (other.status_code, other.content) == (404, unknown.content)
    assert api.post(f"tokens/{theirs.pk}/revoke/", token=mine).status_code == 404
    theirs.refresh_from_db()
    assert theirs.revoked_at is None


def test_revoke(api, member):
    caller = make_token(member, ["api"], days=30)
    victim = api.post("tokens/", token=caller, json={"name": "x", "scopes": ["api"], "expires_at": future()}).json()
    response = api.post(f"tokens/{victim['id']}/revoke/", token=caller)
    assert response.status_code == 200 and response.json()["revoked_at"] and not response.json()["active"]
    assert api.get("tokens/", token=victim["token"]).status_code == 401


def test_validation(api, member):
    caller = make_token(member, ["api", "discover"], days=30)
    for body, field in [
        ({"name": "x", "scopes": ["api", "root"], "expires_at": future()}, "scopes"),
        ({"name": "x", "scopes": [], "expires_at": future()}, "scopes"),
        ({"name": "x", "scopes": ["api"], "expires_at": "2001-01-01T00:00:00Z"}, "expires_at"),
        ({"name": "x", "scopes": ["api"], "expires_at": "soon"}, "expires_at"),
        ({"scopes": ["api"], "expires_at": future()}, "name"),
    ]:
        response = api.post("tokens/", token=caller, json=body)
        assert response.status_code == 400, body
        assert field in error_of(response)["fields"], (body, response.text)


def test_token_cannot_mint_more_than_itself(api, member):
    from governance.models import ApiToken

    caller = make_token(member, ["api", "discover"], days=1)
    wider = api.post("tokens/", token=caller, json={"name": "x", "scopes": ["api", "execute"], "expires_at": future(1)})
    assert wider.status_code == 403 and error_of(wider)["code"] == "insufficient_scope"
    longer = api.post("tokens/", token=caller, json={"name": "x", "scopes": ["api"], "expires_at": future(30)})
    assert longer.status_code == 400 and "expires_at" in error_of(longer)["fields"]
    limited = make_token(member, ["api", "discover", "server:github"])
    unlimited = api.post(
        "tokens/", token=limited, json={"name": "x", "scopes": ["api", "discover"], "expires_at": future(-0.5)}
    )
    assert unlimited.status_code == 403
    assert ApiToken.objects.count() == 2


def test_session_may_mint_any_scopes(api, member):
    from tests.api.conftest import http, session_cookies

    member.is_staff = True  # a session comes from the admin's sign-in
    member.save()
    cookies = session_cookies(member)
    response = http(
        "POST",
        f"{api.base}/api/v1/tokens/",
        cookies=cookies,
        headers={"X-CSRFToken": cookies["csrftoken"]},
        json={"name": "agent", "scopes": ["discover", "execute"], "expires_at": future()},
    )
    assert response.status_code == 201
    # An MCP token (no "api" scope) cannot use the REST API.
    assert api.get("tokens/", token=response.json()["token"]).status_code == 403


def test_pagination(api, member):
    caller = make_token(member, ["api"])
    for _ in range(3):
        make_token(member, ["api"])
    body = api.get("tokens/?page_size=3", token=caller).json()
    assert body["count"] == 4 and len(body["results"]) == 3 and body["next"]


def test_a_person_holds_a_bounded_number_of_live_tokens(api, member, settings):
    """T13: any token with the api scope minted more without limit (a row, a rate and a secret each). Past
    SCOUT_MAX_LIVE_TOKENS_PER_PERSON live tokens a new one is refused, naming the setting and how to free one;
    revoked and expired tokens do not count."""
    from governance.models import ApiToken

    settings.SCOUT_MAX_LIVE_TOKENS_PER_PERSON = 3
    caller = make_token(member, ["api"], days=30)
    body = {"name": "x", "scopes": ["api"], "expires_at": future()}
    minted = [api.post("tokens/", token=caller, json=body) for _ in range(3)]
    assert [response.status_code for response in minted] == [201, 201, 400]
    refusal = error_of(minted[2])  # a refusal of no field the caller sent (it named no user): message only
    assert refusal["code"] == "invalid" and refusal["fields"] == {}
    assert "SCOUT_MAX_LIVE_TOKENS_PER_PERSON" in refusal["message"] and "revoke" in refusal["message"]
    assert ApiToken.objects.filter(user=member).count() == 3

    assert api.post(f"tokens/{minted[0].json()['id']}/revoke/", token=caller).status_code == 200
    assert api.post("tokens/", token=caller, json=body).status_code == 201
    ApiToken.objects.filter(pk=minted[1].json()["id"]).update(expires_at=timezone.now() - timedelta(seconds=1))
    assert api.post("tokens/", token=caller, json=body).status_code == 201
    assert api.post("tokens/", token=caller, json=body).status_code == 400


def test_a_token_reads_and_revokes_only_the_tokens_it_could_have_minted(api, member):
    """Z8: a token mints only tokens of its own tenant and of its own agent or one below it, yet it listed, read and
    revoked every token of its person: an agent's token (one prompt injection away from a tool's output) revoked its
    person's own token and its sibling agents', and read their names and scopes; a token acting in tenant A did the
    same to the person's tokens in tenant B. A token now reaches only the tokens it could have minted; a session
    (the person at the keyboard) still reaches them all."""
    from governance.models import ApiToken
    from tests.governance.factories import agent_of, tenant_with

    tenant_a, tenant_b = tenant_with("tenant-a", member), tenant_with("tenant-b", member)
    bot = agent_of(member, "bot", tenant=tenant_a)
    helper = agent_of(member, "helper", tenant=tenant_a, parent=bot)
    sibling = agent_of(member, "sibling", tenant=tenant_a)
    scopes = ["api", "discover"]
    bots = make_token(member, scopes, agent=bot, tenant=tenant_a)
    make_token(member, scopes, agent=helper, tenant=tenant_a)
    make_token(member, scopes, agent=sibling, tenant=tenant_a)
    make_token(member, scopes, tenant=tenant_a)  # the person's own, in tenant A
    in_b = make_token(member, scopes, tenant=tenant_b)
    make_token(member, scopes)  # the person's own, shared
    assert ApiToken.objects.count() == 6

    def listed(raw: str) -> set[int]:
        return {row["id"] for row in api.get("tokens/", token=raw).json()["results"]}

    assert listed(bots) == set(ApiToken.objects.filter(agent__in=[bot, helper]).values_list("pk", flat=True))
    assert listed(in_b) == set(ApiToken.objects.filter(tenant=tenant_b).values_list("pk", flat=True))
    for other in ApiToken.objects.exclude(agent__in=[bot, helper]):
        assert api.get(f"tokens/{other.pk}/", token=bots).status_code == 404
        assert api.post(f"tokens/{other.pk}/revoke/", token=bots).status_code == 404
    assert not ApiToken.objects.filter(revoked_at__isnull=False).exists()
    helpers = ApiToken.objects.get(agent=helper)
    assert api.post(f"tokens/{helpers.pk}/revoke/", token=bots).status_code == 200  # one below it: its to revoke


def test_a_narrower_token_reads_and_revokes_no_token_that_can_do_more_than_itself(api, member):
    """Z8/T16: redteam16 kept a token to the tokens of its tenant and agent, not to those it could have minted: a
    token limited to the api scope, or to one server (given to one integration), listed its person's full tokens
    (names, scopes) and revoked them, and with them every token they had minted. A token now reaches only tokens
    within its own scopes and server limits; a wider one is a 404 like another person's."""
    from governance.models import ApiToken

    full = make_token(member, ["api", "discover", "execute"], days=7)
    limited = make_token(member, ["api", "discover", "server:github"], days=3)
    api_only = make_token(member, ["api"], days=2)
    same = make_token(member, ["api"], days=5)  # api_only's rights, a later expiry: reached
    by_days = {round((t.expires_at - t.created_at).total_seconds() / 86400): t.pk for t in ApiToken.objects.all()}

    def listed(raw: str) -> set[int]:
        return {row["id"] for row in api.get("tokens/", token=raw).json()["results"]}

    assert listed(full) == set(by_days.values())
    assert listed(limited) == {by_days[3]}
    assert listed(api_only) == {by_days[2], by_days[5]}
    for raw, wider in ((limited, 7), (limited, 2), (api_only, 7), (api_only, 3)):
        assert api.get(f"tokens/{by_days[wider]}/", token=raw).status_code == 404
        assert api.post(f"tokens/{by_days[wider]}/revoke/", token=raw).status_code == 404
    assert not ApiToken.objects.filter(revoked_at__isnull=False).exists()
    assert listed(same) == {by_days[2], by_days[5]}
    assert api.post(f"tokens/{by_days[3]}/revoke/", token=full).status_code == 200  # within it: its to revoke


def test_revoking_a_token_revokes_the_tokens_it_minted(api, member):
    """T16: a token that leaked is revoked, but whoever held it had minted another first (one POST): that one
    carried on. Revoking a token now revokes every live token it minted, and theirs in turn; a sibling the person
    minted otherwise is untouched."""
    from governance.models import ApiToken, AuditEvent
    from governance.services.tokens import api_token_revoke

    leaked = make_token(member, ["api", "discover"], days=30)
    person = make_token(member, ["api", "discover"], days=30)

    def mint(by: str, name: str, days: int) -> dict:
        response = api.post(
            "tokens/", token=by, json={"name": name, "scopes": ["api", "discover"], "expires_at": future(days)}
        )
        assert response.status_code == 201, response.text
        return response.json()

    child = mint(leaked, "kept by the thief", 7)
    grandchild = mint(child["token"], "and another", 6)
    sibling = mint(person, "the person's own", 7)
    leaked_row = ApiToken.objects.filter(user=member).order_by("pk").first()  # made first
    api_token_revoke(token=leaked_row, actor=member)
    for raw in (leaked, child["token"], grandchild["token"]):
        assert api.get("tools/", token=raw).status_code == 401
    for raw in (person, sibling["token"]):
        assert api.get("tools/", token=raw).status_code == 200
    revoked = AuditEvent.objects.filter(event_type="token.revoked").values_list("payload__token", flat=True)
    assert sorted(revoked) == sorted(f"tok-{pk}" for pk in (leaked_row.pk, child["id"], grandchild["id"]))
    # The trail says which token minted which (the rows' link is all there was: tokens made before it have none).
    created = dict(
        AuditEvent.objects.filter(event_type="token.created").values_list("payload__token", "payload__minted_by")
    )
    assert created[f"tok-{child['id']}"] == f"tok-{leaked_row.pk}"
    assert created[f"tok-{grandchild['id']}"] == f"tok-{child['id']}"
    assert created[f"tok-{leaked_row.pk}"] == ""


def test_a_token_minted_while_its_minter_is_revoked_is_refused_or_revoked_with_it(api, member):
    """T16 (Postgres): the mint checked its minting token when the request was authenticated, and the revocation
    revoked the children it found when it ran: a mint already past authentication when the person revoked the leaked
    token (whoever held it can keep one in flight) saved its child after the revocation had looked, and the child
    lived on. The mint now locks its minter's row and refuses once it is revoked, and the revocation's lock on that
    row makes a mint that got there first visible to it. Held here: the mint waits on its person's row, which the
    test holds while it revokes the minter."""
    from concurrent.futures import ThreadPoolExecutor

    from django.contrib.auth import get_user_model
    from django.db import connection, transaction

    from governance.models import ApiToken
    from governance.services.tokens import api_token_revoke
    from tests.postgres_locks import until_sessions_wait_on_locks

    if connection.vendor != "postgresql":
        pytest.skip("needs Postgres: a mint held inside the API by a row lock while its minter is revoked")
    leaked = make_token(member, ["api", "discover"], days=30)
    minter = ApiToken.objects.get()

    def mint():
        return api.post("tokens/", token=leaked, json={"name": "copy", "scopes": ["api"], "expires_at": future(9)})

    with ThreadPoolExecutor(max_workers=1) as pool:
        with transaction.atomic():
            get_user_model().objects.select_for_update().filter(pk=member.pk).exists()
            answer = pool.submit(mint)
            until_sessions_wait_on_locks(1, "the mint is past authentication, waiting on the person's row")
            api_token_revoke(token=minter, actor=member)
        response = answer.result(timeout=60)

    assert not ApiToken.objects.filter(revoked_at__isnull=True).exists(), response.json()
    assert response.status_code == 400 and "revoked or expired" in str(error_of(response)["fields"]), response.json()
