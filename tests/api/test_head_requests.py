"""HEAD runs a view's GET handler: it needs the permissions GET needs, or its Content-Length tells what GET refuses."""

import pytest

from tests.api.conftest import api_db, give_perms, make_token

pytestmark = api_db


@pytest.fixture
def learned(catalog):
    from search.models import LearnedRequest

    return LearnedRequest.objects.create(tool=catalog.visible, text="what bugs are open", key="k1", principal_count=2)


def test_head_of_learned_requests_needs_the_curator_permission(api, catalog, member, learned):
    """Before: GET was refused (403) to a searcher without search.view_learnedrequest, yet HEAD answered 200 with the
    list's length (246 bytes with one learned request, 52 with none): whether, and how much, other users' words were
    learned for the tool."""
    token = make_token(member, ["api", "discover"])
    url = f"tools/{catalog.visible.tool_id}/learned-requests/"
    assert api.request("GET", url, token=token).status_code == 403
    head = api.request("HEAD", url, token=token)
    assert head.status_code == 403
    learned.delete()
    assert api.request("HEAD", url, token=token).headers["content-length"] == head.headers["content-length"]


@pytest.mark.parametrize("path", ["audit/?event_type=discovery", "servers/", "sync-runs/"])
def test_head_needs_the_permissions_get_needs(api, owner, catalog, path):
    """Staff without the audit, server or sync-run view permission: GET refused, HEAD refused the same way."""
    owner.user_permissions.clear()
    token = make_token(owner, ["api"])
    assert api.request("GET", path, token=token).status_code == 403
    assert api.request("HEAD", path, token=token).status_code == 403


def test_head_still_answers_who_may_get(api, owner, catalog, learned):
    give_perms(owner, "catalog.view_tool", "search.view_learnedrequest")
    token = make_token(owner, ["api", "discover"])
    url = f"tools/{catalog.visible.tool_id}/learned-requests/"
    get, head = api.request("GET", url, token=token), api.request("HEAD", url, token=token)
    assert (get.status_code, head.status_code) == (200, 200)
    assert head.headers["content-length"] == str(len(get.content)) and head.content == b""
