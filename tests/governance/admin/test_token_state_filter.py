"""The token list filters by what a token does now: active, expired or revoked (as its state column says)."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone

from governance.models import ApiToken
from governance.services.tokens import api_token_create, api_token_revoke
from tests.governance.factories import in_days

pytestmark = pytest.mark.django_db


def _token(member, name: str, days: float) -> ApiToken:
    token, _ = api_token_create(user=member, name=name, scopes=["discover"], expires_at=in_days(days))
    return token


def test_token_list_filters_by_state(client, superuser, member):
    _token(member, "laptop", 30)
    old = _token(member, "old ci", 30)
    ApiToken.objects.filter(pk=old.pk).update(expires_at=timezone.now() - timedelta(days=1))
    api_token_revoke(token=_token(member, "leaked", 30), actor=superuser)
    stolen = _token(member, "stolen", 30)
    api_token_revoke(token=stolen, actor=superuser)
    ApiToken.objects.filter(pk=stolen.pk).update(expires_at=timezone.now() - timedelta(days=1))  # revoked first
    client.force_login(superuser)
    url = reverse("admin:governance_apitoken_changelist")

    def names(state: str) -> set[str]:
        page = client.get(url, {"state": state} if state else {})
        return {token.name for token in page.context["cl"].result_list}

    assert names("") == {"laptop", "old ci", "leaked", "stolen"}
    assert names("active") == {"laptop"}
    assert names("expired") == {"old ci"}
    assert names("revoked") == {"leaked", "stolen"}
    html = client.get(url).content.decode()
    assert all(f'href="?state={state}"' in html for state in ("active", "expired", "revoked"))
