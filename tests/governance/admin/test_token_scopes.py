"""Token scopes in the admin: chosen from what exists (what the token may do, then the servers the admin manages)
and read back in words, stored as before (``["discover", "execute", "server:<slug>"]``)."""

import html as html_module

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.admin.tokens import SCOPE_LABELS
from governance.constants import BASE_SCOPES
from governance.models import ApiToken, ServerTenant
from governance.roles import CURATORS, OPERATORS
from governance.services.tokens import api_token_create
from tests.governance.factories import ServerFactory, in_days, tenant_with

pytestmark = pytest.mark.django_db
ADD = "admin:governance_apitoken_add"


def _staff(django_user_model, username: str, role: str):
    user = django_user_model.objects.create_user(username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return user


def _post(member, **extra) -> dict:
    return {
        "user": member.pk,
        "name": "laptop",
        "base_scopes": ["discover", "execute"],
        "expires_at_0": in_days(7).strftime("%Y-%m-%d"),
        "expires_at_1": "12:00:00",
        **extra,
    }


@pytest.fixture
def servers():
    """Two shared servers, an archived one and one of tenant "bravo"."""
    made = {slug: ServerFactory(slug=slug) for slug in ("github", "time", "old", "bravo-srv")}
    made["old"].status = "archived"
    made["old"].save()
    ServerTenant.objects.create(server=made["bravo-srv"], tenant=tenant_with("bravo"))
    return made


def _server_choices(page: str) -> list[str]:
    form = page[page.index('name="server_scopes"') :]
    form = form[: form.index("</select>")]
    return [value for value in form.split('value="')[1:] for value in [value[: value.index('"')]]]


def test_every_base_scope_has_words():
    assert set(SCOPE_LABELS) == BASE_SCOPES


def test_the_add_form_offers_scopes_in_words_and_existing_servers(client, superuser, servers):
    client.force_login(superuser)
    page = client.get(reverse(ADD)).content.decode()
    assert "execute: call tools (execute_tool)" in page and "api: use the REST API (/api/v1/)" in page
    assert _server_choices(page) == ["bravo-srv", "github", "time"]  # a superuser manages every live server
    assert "comma-separated" not in page


def test_a_tenant_operator_is_offered_shared_servers_and_their_tenants_only(client, django_user_model, servers):
    operator = _staff(django_user_model, "op-alpha", OPERATORS)
    tenant_with("alpha", operator)
    alpha_srv = ServerFactory(slug="alpha-srv")
    ServerTenant.objects.create(server=alpha_srv, tenant=tenant_with("alpha"))
    client.force_login(operator)
    page = client.get(reverse(ADD)).content.decode()
    assert _server_choices(page) == ["alpha-srv", "github", "time"] and "bravo-srv" not in page
    member = django_user_model.objects.create_user(username="m")
    refused = client.post(reverse(ADD), _post(member, server_scopes=["bravo-srv"]))
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert not ApiToken.objects.exists()


def test_the_add_form_is_refused_without_the_permission(client, django_user_model, servers):
    client.force_login(_staff(django_user_model, "cur", CURATORS))
    assert client.get(reverse(ADD)).status_code == 403


def test_chosen_servers_are_stored_as_server_scopes_and_read_back_in_words(client, superuser, member, servers):
    client.force_login(superuser)
    response = client.post(reverse(ADD), _post(member, server_scopes=["time", "github"]))
    assert response.status_code == 200 and "scout_" in response.content.decode()  # the token, shown once
    token = ApiToken.objects.get()
    assert token.scopes == ["discover", "execute", "server:github", "server:time"]
    change = html_module.unescape(
        client.get(reverse("admin:governance_apitoken_change", args=[token.pk])).content.decode()
    )
    assert "discover, execute · only github, time" in change and '["discover"' not in change
    listing = html_module.unescape(client.get(reverse("admin:governance_apitoken_changelist")).content.decode())
    assert "discover, execute · only github, time" in listing and '["discover"' not in listing


def test_a_token_without_server_scopes_reads_every_server(client, superuser, member):
    token, _ = api_token_create(user=member, name="t", scopes=["api", "discover"], expires_at=in_days(1))
    client.force_login(superuser)
    page = html_module.unescape(
        client.get(reverse("admin:governance_apitoken_change", args=[token.pk])).content.decode()
    )
    assert "api, discover · every server its user may use" in page


def test_the_approve_scope_says_an_agents_token_decides_nothing(client, superuser, member):
    """Adminux24: an agent's token with the approve scope reads the inbox but is refused every decision (403
    agent_decides); the add form said "decide approval requests" and the token's page "approve", so a person ticked it
    for their agent and learned otherwise from the 403. The form says it before it is ticked, the page after."""
    from tests.governance.factories import agent_of

    client.force_login(superuser)
    page = html_module.unescape(client.get(reverse(ADD)).content.decode())
    assert "on a token for an agent, the inbox only: deciding is a person's act" in page
    mine, _ = api_token_create(user=superuser, name="me", scopes=["api", "approve"], expires_at=in_days(1))
    bot = agent_of(superuser, "inbox-bot")
    theirs, _ = api_token_create(
        user=superuser, name="bot", agent=bot, scopes=["api", "approve"], expires_at=in_days(1)
    )
    read = {
        token.name: html_module.unescape(
            client.get(reverse("admin:governance_apitoken_change", args=[token.pk])).content.decode()
        )
        for token in (mine, theirs)
    }
    assert "api, approve · every server" in read["me"] and "decides nothing" not in read["me"]
    assert "api, approve (reads the inbox, decides nothing: an agent's token) · every server" in read["bot"]


def test_the_add_form_refuses_a_token_past_the_persons_live_tokens(client, superuser, member, settings):
    """The admin's add form says why (SCOUT_MAX_LIVE_TOKENS_PER_PERSON) instead of failing at save."""
    settings.SCOUT_MAX_LIVE_TOKENS_PER_PERSON = 1
    api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
    client.force_login(superuser)
    response = client.post(reverse(ADD), _post(member))
    assert response.status_code == 200
    assert "SCOUT_MAX_LIVE_TOKENS_PER_PERSON" in html_module.unescape(response.content.decode())
    assert ApiToken.objects.filter(user=member).count() == 1


def test_choosing_more_servers_than_a_token_may_name_is_a_form_error(client, superuser, member):
    from governance.constants import MAX_TOKEN_SERVER_SCOPES

    slugs = [f"s{n}" for n in range(MAX_TOKEN_SERVER_SCOPES + 1)]
    for slug in slugs:
        ServerFactory(slug=slug)
    client.force_login(superuser)
    refused = client.post(reverse(ADD), _post(member, server_scopes=slugs))
    assert refused.status_code == 200
    assert f"a token names at most {MAX_TOKEN_SERVER_SCOPES} servers" in html_module.unescape(refused.content.decode())
    assert not ApiToken.objects.exists()
    kept = client.post(reverse(ADD), _post(member, server_scopes=slugs[:MAX_TOKEN_SERVER_SCOPES]))
    assert kept.status_code == 200 and ApiToken.objects.count() == 1


def test_an_expiry_past_the_token_lifetime_limit_is_a_form_error(client, superuser, member, settings):
    """redteam35: the admin issued a token expiring in 9999 (a secret for ever once leaked)."""
    settings.SCOUT_TOKEN_MAX_DAYS = 365
    client.force_login(superuser)
    refused = client.post(reverse(ADD), _post(member, expires_at_0="9999-12-31"))
    assert refused.status_code == 200
    assert "a token lives at most 365 days" in html_module.unescape(refused.content.decode())
    assert not ApiToken.objects.exists()
    kept = client.post(reverse(ADD), _post(member))
    assert kept.status_code == 200 and ApiToken.objects.count() == 1
