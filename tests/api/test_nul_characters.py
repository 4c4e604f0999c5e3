"""A NUL character in an API address or query parameter is a 400 naming the problem, never a 500: views hand
slugs, ids and filters to the database as they come, and Postgres refuses a NUL in text (a 500 with a traceback
logged per request, while SQLite matched nothing)."""

import pytest

from tests.api.conftest import api_db, error_of, give_perms, make_token

pytestmark = api_db

REQUESTS = [
    ("tools/", {"q": "issues\x00"}),
    ("tools/", {"server": "github\x00"}),
    ("approvals/appr-\x00/", {}),
    ("audit/", {"user": "member\x00"}),
    ("audit/", {"tool": "github::list_issues\x00"}),
    ("servers/github\x00/", {}),
    ("servers/", {"status": "active\x00"}),
    ("sync-runs/", {"source": "api:\x00"}),
]


@pytest.fixture
def token(django_user_model, catalog):
    staff = django_user_model.objects.create_user(username="staffer", is_staff=True)
    give_perms(staff, "governance.view_auditevent", "catalog.view_server", "catalog.view_syncrun")
    return make_token(staff, ["discover", "execute", "approve", "api"])


@pytest.mark.parametrize(("path", "params"), REQUESTS)
def test_a_nul_in_the_address_or_a_filter_is_a_400_not_a_500(api, token, path, params):
    response = api.get(path.replace("\x00", "%00"), token=token, params=params)
    assert response.status_code == 400, response.text
    error = error_of(response)
    assert error["code"] == "parse_error" and "NUL character" in error["message"]


def test_the_same_requests_without_the_nul_are_served(api, token):
    for path, params in REQUESTS:
        response = api.get(
            path.replace("\x00", ""), token=token, params={k: v.strip("\x00") for k, v in params.items()}
        )
        assert response.status_code in (200, 404), (path, response.text)
