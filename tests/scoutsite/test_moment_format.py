"""Detail pages show moments as the lists do, 2026-12-04 15:38 (scoutsite/formats), not Django's English
'Dec. 4, 2026, 3:38 p.m.': a server's last sync, a token, a tool review and a query-log entry."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from governance.choices import ReviewKind
from governance.models import ToolReview
from governance.services.tokens import api_token_create
from search.models import QueryLogEntry
from tests.governance.factories import ServerFactory, ToolFactory

pytestmark = pytest.mark.django_db

MOMENT = datetime(2031, 12, 4, 15, 38, 20, tzinfo=UTC)
SHOWN = "2031-12-04 15:38"


def _page(client, name: str, pk) -> str:
    page = client.get(reverse(f"admin:{name}_change", args=[pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "p.m." not in text and "Dec. 4" not in text
    return text


def test_detail_pages_show_moments_as_the_lists_do(client, superuser, settings):
    settings.SCOUT_TOKEN_MAX_DAYS = 0  # a fixed moment years ahead: no limit on the token's expiry here
    client.force_login(superuser)
    server = ServerFactory(slug="clock", last_synced_at=MOMENT)
    assert SHOWN in _page(client, "catalog_server", server.pk)

    token, _ = api_token_create(user=superuser, name="laptop", scopes=["discover"], expires_at=MOMENT)
    assert SHOWN in _page(client, "governance_apitoken", token.pk)

    review = ToolReview.objects.create(
        tool=ToolFactory(server=server), definition_hash="a" * 64, kind=ReviewKind.CHANGED, decided_at=MOMENT
    )
    assert SHOWN in _page(client, "governance_toolreview", review.pk)

    entry = QueryLogEntry.objects.create(
        created_at=MOMENT, user=superuser, principal_key="u1", log_mode="full", query="time", confidence="high"
    )
    assert SHOWN in _page(client, "search_querylogentry", entry.pk)
