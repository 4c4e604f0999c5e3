"""The curator preview before any index is built (test_preview.py's tests share one indexed catalog)."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from .test_preview import PREVIEW

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


@pytest.fixture
def curator(django_user_model):
    user = django_user_model.objects.create_user(username="curator", is_staff=True)  # no password (force_login)
    user.user_permissions.add(Permission.objects.get(codename="view_tool", content_type__app_label="catalog"))
    return user


def test_with_no_index_the_preview_says_nothing_is_ranked_and_gives_no_confidence(client, curator, small_catalog):
    # At a year's volume with no index built, the page read "Confidence the gateway gives: high" over "No tool listed".
    client.force_login(curator)
    response = client.get(reverse(PREVIEW), {"query": "weather forecast", "top_k": 5, "scope": "every"})
    assert response.context["outcome"].result.index_ready is False
    body = response.content.decode()
    assert 'id="preview-no-index"' in body and "nothing is ranked" in body
    assert "preview-confidence" not in body and "Confidence the gateway gives" not in body
