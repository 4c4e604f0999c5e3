"""A held change's page is titled for what its reader does there: review it (who may decide), or read it."""

import pytest
from django.urls import reverse

from governance.services.review import tool_review_accept
from tests.governance.admin.test_shared_tools_classified_by_superusers import world  # noqa: F401 - fixture

pytestmark = pytest.mark.django_db


def test_the_title_says_review_to_who_decides_and_names_the_state_to_others(client, superuser, world):  # noqa: F811
    own, shared = world["own"], world["shared"]
    client.force_login(world["curator"])
    page = lambda review: client.get(reverse("admin:governance_toolreview_change", args=[review.pk]))  # noqa: E731
    assert page(own).context["title"] == f"Review the change held for {own.tool.tool_id}"
    # A shared server's change is a superuser's to decide: tenant A's curator reads it.
    assert page(shared).context["title"] == f"Definition change to {shared.tool.tool_id}: pending review"
    assert "Change tool review" not in page(shared).content.decode()
    tool_review_accept(review=own, actor=superuser)
    assert page(own).context["title"] == f"Definition change to {own.tool.tool_id}: accepted"
