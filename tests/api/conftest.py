"""REST API tests: real HTTP (httpx) against pytest-django's live server, real tokens and grants.

Data is committed (transactional tests) so the server thread sees it; with in-memory SQLite it shares the
test connection. Personas come from tests/conftest.py."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import httpx
import pytest
from django.contrib.auth.models import Permission
from django.utils import timezone

api_db = pytest.mark.django_db(transaction=True)

# httpx.request() makes a client for each call, and each client loads the CA bundle into a new SSL context: 40 ms of
# CPU, more than most of these requests take to answer. The live server speaks plain HTTP; one context serves all.
_SSL_CONTEXT = httpx.create_ssl_context()


def http(method: str, url: str, **kwargs: Any) -> httpx.Response:
    """httpx.request(), without a new SSL context each time."""
    return httpx.request(method, url, verify=_SSL_CONTEXT, **kwargs)


@dataclass
class Api:
    base: str

    def request(self, method: str, path: str, *, token: str | None = None, **kwargs: Any) -> httpx.Response:
        headers = dict(kwargs.pop("headers", {}) or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        return http(method, f"{self.base}/api/v1/{path.lstrip('/')}", headers=headers, timeout=60, **kwargs)

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("GET", path, **kwargs)

    def post(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("POST", path, **kwargs)

    def patch(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.request("PATCH", path, **kwargs)


@pytest.fixture
def api(live_server, settings) -> Api:
    settings.SCOUT_API_RATE = "10000/minute"
    return Api(live_server.url)


def make_token(user: Any, scopes: list[str], *, days: int = 1, **extra: Any) -> str:
    from governance.services.tokens import api_token_create

    _, raw = api_token_create(
        user=user,
        name=f"{user.get_username()} api test",
        scopes=scopes,
        expires_at=timezone.now() + timedelta(days=days),
        **extra,
    )
    return raw


def give_perms(user: Any, *perms: str) -> None:
    """Django model permissions ("app.codename"), as an admin would assign them."""
    for perm in perms:
        app, codename = perm.split(".")
        user.user_permissions.add(Permission.objects.get(content_type__app_label=app, codename=codename))


@pytest.fixture
def grant(superuser):
    """grant(holder, target, *actions) through the audited governance service."""
    from governance.services.permissions import permission_grant

    def _grant(holder: Any, target: Any, *actions: str) -> None:
        for action in actions or ("discover",):
            permission_grant(actor=superuser, target=target, action=action, holder=holder)

    return _grant


@dataclass
class Catalog:
    """github (member may discover it): visible + held tools; payroll (no grant): a hidden tool."""

    github: Any
    visible: Any
    held: Any
    payroll: Any
    hidden: Any


@pytest.fixture
def catalog(grant, member) -> Catalog:
    from governance.cache import visibility_invalidate
    from governance.models import ToolPolicy
    from tests.governance.factories import ServerFactory, ToolFactory

    github = ServerFactory(slug="github")
    visible = ToolFactory(server=github, name="list_issues", description="List the issues of a repository.")
    held = ToolFactory(server=github, name="list_secrets", description="List the issues and secrets.")
    ToolPolicy.objects.filter(tool=held).update(held=True, hold_reason="suspicious text")
    payroll = ServerFactory(slug="payroll")
    hidden = ToolFactory(server=payroll, name="list_salaries", description="List the issues of salaries.")
    grant(member, github, "discover")
    visibility_invalidate()  # the hold above was an update(): no signal
    return Catalog(github=github, visible=visible, held=held, payroll=payroll, hidden=hidden)


def error_of(response: httpx.Response) -> dict[str, Any]:
    body = response.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"code", "message", "fields"}, body
    return body["error"]


def session_cookies(user: Any) -> dict[str, str]:
    """A logged-in Django session for ``user`` plus a CSRF cookie, as a browser on the admin would hold."""
    from django.middleware.csrf import _get_new_csrf_string
    from django.test import Client

    client = Client()
    client.force_login(user)
    return {"sessionid": client.cookies["sessionid"].value, "csrftoken": _get_new_csrf_string()}


@pytest.fixture
def pending(catalog, member, grant):
    """A pending request by ``member`` to call a mutating github tool."""
    from governance.services.approvals import approval_request_create
    from tests.governance.factories import ToolFactory

    tool = ToolFactory(server=catalog.github, name="delete_repo", annotations=None)
    grant(member, catalog.github, "discover", "execute")
    from governance.services.tokens import api_token_verify

    principal = api_token_verify(make_token(member, ["discover", "execute"]))
    return approval_request_create(principal=principal, tool=tool, arguments={"repo": "scout"})
