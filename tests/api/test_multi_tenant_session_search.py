"""Z12: a person who is a member of two tenants searches over REST in a session (acting in both at once). What
that search found names both tenants' tools: its query log row and discovery audit event were filed as shared,
where every other tenant's curators and operators read the words and those tools."""

import pytest

from tests.api.conftest import api_db, session_cookies
from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

pytestmark = api_db

QUERY = "run the payroll of the merger"


@pytest.fixture
def dana(grant, django_user_model):
    """dana is in acme and globex and may discover a payroll tool of each; ann reads acme's records, gil globex's
    and ivy initech's."""
    from governance.cache import visibility_invalidate
    from governance.models import ServerTenant

    dana = django_user_model.objects.create_user(username="dana", is_staff=True)  # a session: the admin's sign-in
    for slug in ("acme", "globex"):
        tenant = tenant_with(slug, dana)
        server = ServerFactory(slug=f"{slug}-payroll")
        ServerTenant.objects.create(server=server, tenant=tenant)
        ToolFactory(server=server, name="run_payroll", description="Run the payroll of the merger.")
        grant(dana, server, "discover")
    for name, slug in (("ann", "acme"), ("gil", "globex"), ("ivy", "initech")):
        tenant_with(slug, django_user_model.objects.create_user(username=name, is_staff=True))
    visibility_invalidate()
    return dana


def _search_in_a_session(api, user) -> list[str]:
    cookies = session_cookies(user)
    response = api.post(
        "search/", json={"query": QUERY}, cookies=cookies, headers={"X-CSRFToken": cookies["csrftoken"]}
    )
    assert response.status_code == 200, response.text
    return sorted(match["tool_id"] for match in response.json()["matches"])


def _discoveries_read_by(username: str) -> list[list[str]]:
    from django.contrib.auth import get_user_model

    from governance.principals import principal_for_user
    from governance.selectors import audit_events_visible_to

    reader = principal_for_user(get_user_model().objects.get(username=username))
    events = audit_events_visible_to(principal=reader).filter(event_type="discovery")
    return [event.payload["returned"] for event in events]


def test_a_search_acting_in_two_tenants_is_never_filed_as_shared(api, dana):
    from django.contrib.auth import get_user_model

    from search.usage import query_log_visible_to

    assert _search_in_a_session(api, dana) == ["acme-payroll::run_payroll", "globex-payroll::run_payroll"]
    # Each tenant's operators read the search with their own tool only; a third tenant's read nothing.
    assert _discoveries_read_by("ann") == [["acme-payroll::run_payroll"]]
    assert _discoveries_read_by("gil") == [["globex-payroll::run_payroll"]]
    assert _discoveries_read_by("ivy") == []
    # The words are in no tenant's query log (they belong to no one tenant).
    for name in ("ann", "gil", "ivy"):
        assert not query_log_visible_to(user=get_user_model().objects.get(username=name)).exists(), name
