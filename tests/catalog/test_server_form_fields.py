"""The server form without its script: only the chosen transport's fields may hold a value, each field has a
proper label, and a new server's slug is letters, digits, "-" and "_" (fixed once saved)."""

import pytest
from django.urls import reverse

from catalog.models import Server

pytestmark = pytest.mark.django_db


def _form(**extra) -> dict:
    data = {
        "slug": "clock",
        "name": "Clock",
        "environment": "production",
        "transport": "stdio",
        "command": "mcp-server-time",
        "args": "[]",
        "env_vars": "[]",
        "url": "",
        "header_env": "{}",
        "base_url": "",
        "openapi_url": "",
        "openapi_document": "",
        "openapi_credentials": "[]",
        "status": "active",
    }
    for prefix in ("group_grants", "user_grants", "sync_runs"):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    data.update(extra)
    return data


@pytest.fixture
def admin(client, superuser, settings):
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["mcp.example.com"]  # the HTTP servers' host below
    client.force_login(superuser)
    return client


def _errors(response) -> dict:
    assert response.status_code == 200, "the form was accepted"
    return {name: " ".join(errors) for name, errors in response.context["adminform"].form.errors.items()}


def test_labels_and_help_name_what_each_field_is(admin):
    html = admin.get(reverse("admin:catalog_server_add")).content.decode()
    for label in ("URL:", "Arguments:", "Headers with credentials: environment variable names:", "Base URL:",
                  "OpenAPI document URL:"):  # fmt: skip
        assert f">{label}</label>" in html, label
    assert ">Url:</label>" not in html and ">Header env:</label>" not in html
    assert 'data-transport-fields="' in html and "scout/server_form.js" in html
    assert "Last 10 sync runs" not in html  # a new server has none: no empty table


@pytest.mark.parametrize(
    ("transport", "stray", "value"),
    [
        ("http", "command", "mcp-server-time"),
        ("http", "args", '["--local-timezone", "UTC"]'),
        ("stdio", "url", "https://mcp.example.com/mcp"),
        ("stdio", "header_env", '{"Authorization": "X_TOKEN"}'),
        ("stdio", "openapi_credentials", '[{"type": "bearer", "env": "PETS_TOKEN"}]'),
        ("imported", "command", "mcp-server-time"),
    ],
)
def test_a_value_in_another_transports_field_is_refused(admin, transport, stray, value):
    own = {"http": {"command": "", "url": "https://mcp.example.com/mcp"}, "imported": {"command": ""}}
    data = _form(transport=transport, **own.get(transport, {}))
    response = admin.post(reverse("admin:catalog_server_add"), {**data, stray: value})
    errors = _errors(response)
    assert set(errors) == {stray}
    assert "empty this field or choose another transport" in errors[stray] and "Only for" in errors[stray]
    assert not Server.objects.exists()


def test_empty_boxes_of_other_transports_are_accepted(admin):
    """What the script sends: the hidden transports' boxes emptied, JSON ones included."""
    data = _form(transport="http", command="", args="", env_vars="", url="https://mcp.example.com/mcp",
                 header_env='{"Authorization": "X_TOKEN"}', openapi_credentials="")  # fmt: skip
    response = admin.post(reverse("admin:catalog_server_add"), data)
    assert response.status_code == 302, _errors(response)
    server = Server.objects.get(slug="clock")
    assert (server.command, server.args, server.env_vars, server.openapi_credentials) == ("", [], [], [])
    assert server.header_env == {"Authorization": "X_TOKEN"}


@pytest.mark.parametrize(("slug", "suggestion"), [("Clock Two", "clock-two"), ("clock/two", "clocktwo"),
                                                  ("café", "cafe"), ("a.b", "ab")])  # fmt: skip
def test_a_new_servers_slug_is_letters_digits_hyphens_and_underscores(admin, slug, suggestion):
    errors = _errors(admin.post(reverse("admin:catalog_server_add"), _form(slug=slug)))
    assert "Use only letters, digits, hyphens and underscores" in errors["slug"]
    assert f"e.g. '{suggestion}'" in errors["slug"]
    assert not Server.objects.exists()
    assert admin.post(reverse("admin:catalog_server_add"), _form(slug="Clock_2-b")).status_code == 302


def test_the_slug_is_fixed_once_saved_and_an_imported_name_with_spaces_stays_editable(admin):
    """Imports keep public catalogs' names ("Clock Two"): such a server can still be edited, its slug untouched."""
    server = Server.objects.create(slug="Clock Two", name="Clock Two", transport="imported")
    url = reverse("admin:catalog_server_change", args=[server.pk])
    page = admin.get(url).content.decode()
    assert 'name="slug"' not in page and "Last 10 sync runs" in page
    response = admin.post(url, _form(slug="renamed", name="Clock 2", transport="imported", command=""))
    assert response.status_code == 302, _errors(response)
    server.refresh_from_db()
    assert (server.slug, server.name) == ("Clock Two", "Clock 2")


def test_the_health_section_tells_the_status_set_from_the_status_seen(admin):
    server = Server.objects.create(slug="clock", name="Clock", transport="stdio", command="mcp-server-time")
    page = admin.get(reverse("admin:catalog_server_change", args=[server.pk])).content.decode()
    assert ">Set status:</label>" in page and "Only an Active server's tools reach clients" in page
    assert ">Health now:</label>" in page and "Never synced" in page
    assert ">Status:</label>" not in page  # one "Status" row for the select and another for the badge read as one


def test_alternatives_field_offers_existing_servers_only_and_its_help_is_a_sentence(admin):
    """Alternatives are servers already registered: no "+" opens a new server's form from the field (a server
    registered there was never an alternative chosen), and the help text ends as a sentence."""
    Server.objects.create(slug="clock-eu", name="Clock EU", transport="stdio", command="mcp-server-time")
    server = Server.objects.create(slug="clock", name="Clock", transport="stdio", command="mcp-server-time")
    html = admin.get(reverse("admin:catalog_server_change", args=[server.pk])).content.decode()
    assert 'name="alternatives"' in html and "clock-eu" in html.split('name="alternatives"', 1)[1]
    assert 'id="add_id_alternatives"' not in html
    help_text = Server._meta.get_field("alternatives").help_text
    assert help_text.endswith(".") and help_text in html
