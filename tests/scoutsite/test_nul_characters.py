"""A NUL character in an admin address, query parameter or form field is a 400 before any view runs: the admin's
filters, search and custom pages hand them to the database as they come, and Postgres refuses a NUL in text (a 500
with a traceback logged per request, while SQLite matched nothing)."""

import pytest
from django.contrib.auth.models import Group

from governance.roles import CURATORS, OPERATORS

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff(django_user_model):
    user = django_user_model.objects.create_user(username="curator-operator", is_staff=True)
    user.groups.add(*Group.objects.filter(name__in=(CURATORS, OPERATORS)))
    return user


@pytest.mark.parametrize(
    ("path", "params"),
    [
        ("/admin/catalog/tool/", {"server": "github\x00"}),
        ("/admin/catalog/syncrun/", {"status": "failed\x00"}),
        ("/admin/catalog/server/", {"q": "git\x00hub"}),
        ("/admin/search/learnedrequest/", {"status": "\x00"}),
        ("/admin/search/preview/tool/1/", {"as_user": "member\x00"}),
        ("/admin/catalog/tool/a%00b/change/", {}),
    ],
)
def test_a_nul_in_an_admin_address_or_query_is_a_400(client, staff, path, params):
    client.force_login(staff)
    response = client.get(path, params)
    assert response.status_code == 400
    assert "NUL character" in response.content.decode()


def test_a_nul_in_a_form_field_is_a_400_and_nothing_is_stored(client, staff):
    from search.models import DismissedRequest

    client.force_login(staff)
    response = client.post("/admin/search/workbench/", {"action": "dismiss", "text": "book a\x00 flight"})
    assert response.status_code == 400 and "NUL character" in response.content.decode()
    assert not DismissedRequest.objects.exists()


def test_requests_without_a_nul_are_served(client, staff):
    client.force_login(staff)
    assert client.get("/admin/catalog/tool/", {"server": "github"}).status_code == 200
    assert client.get("/admin/catalog/server/", {"q": "github"}).status_code == 200
    assert client.get("/healthz").status_code == 200
