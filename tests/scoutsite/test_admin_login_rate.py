"""T13: the admin's sign-in page took password attempts without limit. Each attempt runs the password hasher (PBKDF2,
1,000,000 rounds: 0.2 s of CPU here; Django runs it for an unknown name too, so names do not show by timing), so
anyone who can reach /admin/login/ guessed staff passwords (approvers', operators') at will, and every attempt
cost the gateway's host 0.2 s of CPU (30 attempts: 7.0 s). Attempts are now counted per client address
(``SCOUT_ADMIN_LOGIN_RATE``); past it the page answers 429 with Retry-After, and no password is checked."""

from __future__ import annotations

import re

import httpx
import pytest
from django.contrib.auth import get_user_model

pytestmark = pytest.mark.django_db(transaction=True)
PASSWORD = "a-long-admin-password-123"


def _sign_in(client: httpx.Client, base: str, password: str, **headers: str) -> httpx.Response:
    page = client.get(f"{base}/admin/login/", headers=headers)
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    form = {"csrfmiddlewaretoken": csrf, "username": "op", "password": password, "next": "/admin/"}
    return client.post(f"{base}/admin/login/", data=form, headers={"Referer": f"{base}/admin/login/", **headers})


def test_sign_in_attempts_from_one_address_are_limited_before_any_password_is_checked(live_server, settings):
    get_user_model().objects.create_user("op", password=PASSWORD, is_staff=True)
    settings.SCOUT_ADMIN_LOGIN_RATE = "3/minute"
    base = live_server.url
    with httpx.Client(timeout=30) as client:
        guesses = [_sign_in(client, base, f"guess-{n}") for n in range(3)]
        assert [guess.status_code for guess in guesses] == [200, 200, 200]
        assert all("Please enter the correct username and password" in guess.text for guess in guesses)
        refused = _sign_in(client, base, PASSWORD)  # the right password, past the limit: not even checked
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
        assert "Too many sign-in attempts from your address" in refused.text
        assert "sessionid" not in client.cookies
        assert client.get(f"{base}/admin/").status_code == 302  # still signed out

    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}  # behind one proxy: its address counts
    with httpx.Client(timeout=30) as client:
        signed_in = _sign_in(client, base, PASSWORD, **{"X-Forwarded-For": "198.51.100.7"})
        assert signed_in.status_code == 302 and signed_in.headers["location"] == "/admin/"
        assert "sessionid" in client.cookies  # another client: its own budget


def test_addresses_of_one_ipv6_network_share_one_budget(live_server, settings):
    """An IPv6 host is given a /64 network (2^64 addresses; a cloud VM, a home line), so counting each address on
    its own let one attacker take a fresh budget per attempt, and guess without limit (redteam29). Addresses of one
    /64 now share a budget; another network (and an IPv4 client) has its own."""
    get_user_model().objects.create_user("op", password=PASSWORD, is_staff=True)
    settings.SCOUT_ADMIN_LOGIN_RATE = "3/minute"
    settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}  # the proxy names each client
    base = live_server.url
    with httpx.Client(timeout=30) as client:
        guesses = [
            _sign_in(client, base, f"guess-{n}", **{"X-Forwarded-For": f"2001:db8:1:2::{n + 10:x}"}) for n in range(3)
        ]
        assert [guess.status_code for guess in guesses] == [200, 200, 200]
        same_network = _sign_in(client, base, PASSWORD, **{"X-Forwarded-For": "2001:db8:1:2:ffff:ffff:ffff:fffe"})
        assert same_network.status_code == 429, "a new address of the same /64 got a budget of its own"
        assert "sessionid" not in client.cookies
    with httpx.Client(timeout=30) as client:
        other = _sign_in(client, base, PASSWORD, **{"X-Forwarded-For": "2001:db8:1:3::10"})
        assert other.status_code == 302 and "sessionid" in client.cookies  # another network: its own budget


def _password_change(client: httpx.Client, base: str, old: str) -> httpx.Response:
    page = client.get(f"{base}/admin/password_change/")
    csrf = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
    form = {
        "csrfmiddlewaretoken": csrf,
        "old_password": old,
        "new_password1": "N3w-pass-phrase!",
        "new_password2": "N3w-pass-phrase!",
    }
    return client.post(
        f"{base}/admin/password_change/", data=form, headers={"Referer": f"{base}/admin/password_change/"}
    )


def test_password_change_attempts_are_limited_per_person_before_the_old_password_is_checked(live_server, settings):
    """The password change form checks the old password with no limit (redteam58): a stolen session could guess the
    password, to reuse it elsewhere, at one hasher run per attempt. Attempts are now counted per person at the sign-in
    rate; past it the page answers 429 and checks nothing, from whatever address."""
    user = get_user_model().objects.create_user("op", password=PASSWORD, is_staff=True)
    settings.SCOUT_ADMIN_LOGIN_RATE = "3/minute"
    base = live_server.url
    with httpx.Client(timeout=30) as client:
        assert _sign_in(client, base, PASSWORD).status_code == 302
        settings.REST_FRAMEWORK = {**settings.REST_FRAMEWORK, "NUM_PROXIES": 1}  # each guess from a new address
        guesses = []
        for n in range(3):
            client.headers["X-Forwarded-For"] = f"198.51.100.{n + 20}"
            guesses.append(_password_change(client, base, f"guess-{n}"))
        assert [guess.status_code for guess in guesses] == [200, 200, 200]
        assert all("Your old password was entered incorrectly" in guess.text for guess in guesses)
        client.headers["X-Forwarded-For"] = "203.0.113.9"
        refused = _password_change(client, base, PASSWORD)  # the right old password, past the limit: not checked
        assert refused.status_code == 429 and int(refused.headers["retry-after"]) > 0
        assert "Too many password change attempts" in refused.text
    user.refresh_from_db()
    assert user.check_password(PASSWORD), "the password was changed past the limit"
