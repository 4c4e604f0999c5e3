"""Z11 meta-test: every URL Scout serves through Django refuses a caller without the right to it. Each pattern of
the URL configuration (the admin's own, the custom admin pages: preview, workbench, tools agents did not find,
dashboard, a server's sync and connection test, ...) is asked by GET and by POST, as anonymous and as staff holding no
permission, its object id that of a row that exists where its model has one; only the pages named below answer.
A view added without a check fails here, whoever forgets to list it."""

import re

import pytest
from django.apps import apps
from django.contrib.auth import get_user_model
from django.urls import URLPattern, URLResolver, get_resolver

pytestmark = pytest.mark.django_db

# Open to anyone: probes, the site root (each role's way in), the icon, the sign-in page and the API's schema and docs
# (the REST views check a token or a session themselves: ApiAccess). /metrics is loopback-only (test_metrics).
PUBLIC = {"healthz", "readyz", "metrics", "favicon", "home", "admin:login", "api-schema", "api-docs", "api-redoc"}
# Open to any staff member: the admin's home (its panels follow permissions, test_admin_home) and their own password.
STAFF = {"admin:index", "admin:password_change", "admin:password_change_done", "admin:jsi18n"}
REFUSED = {401, 403, 404, 405}


def _patterns(patterns, prefix="", namespace=""):
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}{pattern.namespace}:" if pattern.namespace else namespace
            yield from _patterns(pattern.url_patterns, prefix + str(pattern.pattern), inner)
        elif isinstance(pattern, URLPattern):
            yield prefix + str(pattern.pattern), f"{namespace}{pattern.name or ''}"


ROUTES = sorted(set(_patterns(get_resolver().url_patterns)))


def _address(route: str) -> str | None:
    """A concrete address for a route: its parameter the id of an existing row of the admin page's model (1 for any
    other parameter), regex anchors dropped; None for an admin object page whose model has no row (Django's answer
    "does not exist" would come before the permission check)."""
    value = "1"
    admin_page = re.match(r"admin/(\w+)/(\w+)/", route)
    if admin_page and "<" in route:
        try:
            row = apps.get_model(*admin_page.groups()).objects.order_by("pk").first()
        except LookupError:
            row = None
        if row is None:
            return None
        value = str(row.pk)
    route = re.sub(r"<[^>]+>|\(\?P<[^>]+>[^)]*\)", value, route)
    return "/" + route.replace("^", "").replace("$", "").replace("\\Z", "").replace("\\", "")


def _refused(response) -> bool:
    if response.status_code == 302:
        return "/admin/login/" in response["Location"]
    return response.status_code in REFUSED


def test_the_walk_reaches_the_custom_admin_pages():
    names = {name for _, name in ROUTES}
    assert {"search_preview", "search_workbench", "search_workbench_tools", "admin:catalog_server_sync"} <= names
    assert "admin:catalog_server_test_connection" in names and len(ROUTES) > 100


def test_object_pages_are_asked_about_rows_that_exist(tool, member_token):
    """The object pages named here are asked about a real row, so their own permission check answers."""
    addresses = {name: _address(route) for route, name in ROUTES}
    for name in ("admin:catalog_server_sync", "admin:catalog_tool_change", "admin:governance_apitoken_history"):
        assert addresses[name] is not None


@pytest.mark.parametrize("who", ["anonymous", "staff"])
def test_every_view_refuses_who_may_not_use_it(client, tool, member_token, who):
    open_to = PUBLIC | (STAFF if who == "staff" else set())
    staff = get_user_model().objects.create_user("z11_staff", is_staff=True)
    if who == "staff":
        client.force_login(staff)
    answered = []
    for route, name in ROUTES:
        if name in open_to or name == "admin:logout":  # signing out is every signed-in person's (POST, CSRF)
            continue
        if who == "staff" and (route.startswith("api/") or name == "admin:"):
            # The REST API under a session acts as its person, narrowed by the selectors (tests/api); "admin:" is
            # the admin's old change address, a redirect to the new one.
            continue
        address = _address(route)
        for method in (client.get, client.post) if address else ():
            response = method(address)
            if who == "staff" and response.wsgi_request.user != staff:  # an earlier answer signed them out
                client.force_login(staff)
                response = method(address)
            if not _refused(response):
                answered.append((method.__name__, address, name, response.status_code))
    assert answered == []
