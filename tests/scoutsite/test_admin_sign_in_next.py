"""The sign-in page's ``next=`` (a link anyone can send a staff member): another host, a scheme-relative or
backslashed address and a ``javascript:`` one are never followed, and the person lands on the admin's home, where a
link to a page of the admin's still goes (redteam58). A refused ``next`` fell back to Django's default
``LOGIN_REDIRECT_URL`` (/accounts/profile/), a path Scout does not serve: a 404 right after signing in."""

from __future__ import annotations

import re

import httpx
import pytest
from django.contrib.auth import get_user_model

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "a-long-admin-password-123"


def _sign_in(base: str, target: str) -> tuple[httpx.Response, httpx.Client]:
    client = httpx.Client(timeout=30)
    page = client.get(f"{base}/admin/login/", params={"next": target})
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    form = {"csrfmiddlewaretoken": csrf, "username": "op", "password": PASSWORD, "next": target}
    answer = client.post(
        f"{base}/admin/login/", params={"next": target}, data=form, headers={"Referer": f"{base}/admin/login/"}
    )
    return answer, client


def test_a_next_address_off_the_site_is_never_followed_and_lands_on_the_admins_home(live_server, settings):
    settings.SCOUT_ADMIN_LOGIN_RATE = ""
    get_user_model().objects.create_user("op", password=PASSWORD, is_staff=True)
    base = live_server.url
    refused = ("//evil.example/", "https://evil.example/admin/", "/\\evil.example", "https:evil.example",
               "javascript:alert(1)", "\\\\evil.example")  # fmt: skip
    for target in refused:
        answer, client = _sign_in(base, target)
        assert answer.status_code == 302, target
        assert answer.headers["location"] == "/admin/", (target, answer.headers["location"])
        assert client.get(f"{base}{answer.headers['location']}").status_code == 200
        client.close()
    answer, client = _sign_in(base, "/admin/governance/apitoken/")
    client.close()
    assert answer.status_code == 302 and answer.headers["location"] == "/admin/governance/apitoken/"
