"""Test connection's Save button posts the form as tested to the form's own page, and only where there is something
to save that the test listed: a new server, a saved one's change; not a saved server's unchanged settings, nor a
failed test (adminux25). A scripted stdio MCP server answers."""

import html
import json
import re
import sys

import pytest
from django.urls import reverse

from catalog.choices import Transport
from catalog.models import Server
from governance.roles import OPERATORS
from tests.catalog.servers.fixtures import SCRIPTED, good_tool
from tests.catalog.test_failed_sync_next_step import _add_form, _staff

pytestmark = pytest.mark.django_db


def _save_form(page: str) -> tuple[str, dict[str, str]] | None:
    found = re.search(r'<form method="post" action="([^"]+)" id="test-connection-save"[^>]*>(.*?)</form>', page, re.S)
    if found is None:
        return None
    hidden = re.findall(r'<input type="hidden" name="([^"]+)" value="([^"]*)">', found.group(2))
    return found.group(1), {name: html.unescape(value) for name, value in hidden}


def test_the_save_button_carries_the_tested_form_where_there_is_something_to_save(client, django_user_model, tmp_path):
    client.force_login(_staff(django_user_model, "op", OPERATORS))
    script = tmp_path / "clock.json"
    script.write_text(json.dumps({"pages": [[good_tool("now")]]}))
    args = json.dumps([str(SCRIPTED), str(script)])
    test_url = reverse("admin:catalog_server_test_connection")

    new = _add_form(slug="clock", transport="stdio", command=sys.executable, args=args)
    action, fields = _save_form(client.post(test_url, new).content.decode())
    assert action == reverse("admin:catalog_server_add")
    assert fields["command"] == sys.executable and json.loads(fields["args"]) == json.loads(args)
    assert "_test_connection" not in fields  # else the form page would read the post as a test

    failing = _add_form(slug="clock", transport="stdio", command="mcp-server-not-installed-here")
    assert _save_form(client.post(test_url, failing).content.decode()) is None

    server = Server.objects.create(slug="clock", name="New", transport=Transport.STDIO, command=sys.executable)
    server.args = json.loads(args)
    server.save()
    saved_url = f"{test_url}?server={server.pk}"
    unchanged = _add_form(slug="clock", name="New", transport="stdio", command=sys.executable, args=args)
    # The form's hidden initials of its JSON fields, as a browser posts them: what they were is what they are.
    unchanged |= {f"initial-{name}": unchanged[name] for name in ("args", "env_vars", "header_env")}
    unchanged["initial-openapi_credentials"] = "[]"
    assert _save_form(client.post(saved_url, unchanged).content.decode()) is None
    changed = {**unchanged, "name": "Clock"}
    action, fields = _save_form(client.post(saved_url, changed).content.decode())
    assert action == reverse("admin:catalog_server_change", args=[server.pk]) and fields["name"] == "Clock"
