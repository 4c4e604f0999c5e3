"""Only the chosen transport's fields may hold a value, wherever a server is written: the admin form, REST
``servers/`` (register and edit) and the services refuse another transport's field by name, in the same words
(one rule, ``Server.clean``)."""

import pytest
from django.core.exceptions import ValidationError
from django.urls import reverse

from catalog.models import Server
from catalog.services.servers import server_create, server_update
from tests.api.conftest import api_db, give_perms, make_token
from tests.api.test_servers import OPERATOR_PERMS
from tests.governance.factories import ServerFactory

pytestmark = api_db

HTTP = {"slug": "probe", "name": "Probe", "transport": "http", "url": "https://probe.example/mcp"}
REFUSAL = (
    "Only for stdio (local process) servers, and this one is Streamable HTTP: empty this field or choose another "
    "transport."
)


@pytest.fixture(autouse=True)
def probe_host(settings):
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["probe.example"]
    settings.SCOUT_API_RATE = "10000/minute"


def test_rest_refuses_another_transports_field_on_register_and_edit(api, owner):
    give_perms(owner, *OPERATOR_PERMS)
    token = make_token(owner, ["api"])
    created = api.post("servers/", token=token, json={**HTTP, "command": "/bin/sh", "args": ["-c", "id"]})
    assert created.status_code == 400, created.text
    assert created.json()["error"]["fields"] == {"command": [REFUSAL], "args": [REFUSAL]}
    assert not Server.objects.filter(slug="probe").exists()
    ServerFactory(slug="probe", transport="http", url="https://probe.example/mcp")
    edited = api.patch("servers/probe/", token=token, json={"command": "/bin/sh"})
    assert edited.status_code == 400, edited.text
    assert edited.json()["error"]["fields"] == {"command": [REFUSAL]}
    assert Server.objects.get(slug="probe").command == ""
    moved = api.patch("servers/probe/", token=token, json={"transport": "stdio", "command": "mcp-server-time"})
    assert moved.status_code == 400 and "url" in moved.json()["error"]["fields"]  # its URL must be emptied too
    emptied = {"transport": "stdio", "command": "mcp-server-time", "url": "", "header_env": {}}
    assert api.patch("servers/probe/", token=token, json=emptied).status_code == 200


def test_the_services_and_the_admin_refuse_it_in_the_same_words(client, superuser):
    with pytest.raises(ValidationError) as refused:
        server_create(**HTTP, env_vars=["HOME"])
    assert refused.value.message_dict == {"env_vars": [REFUSAL]}
    server = ServerFactory(slug="probe", transport="http", url="https://probe.example/mcp")
    with pytest.raises(ValidationError) as refused:
        server_update(server=server, command="/bin/sh")
    assert refused.value.message_dict == {"command": [REFUSAL]}
    client.force_login(superuser)
    form = {**HTTP, "slug": "probe-2", "environment": "production", "command": "/bin/sh", "header_env": "{}"}
    form.update({"args": "[]", "env_vars": "[]", "openapi_credentials": "[]", "status": "active"})
    for prefix in ("group_grants", "user_grants"):
        form.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    page = client.post(reverse("admin:catalog_server_add"), form)
    assert page.status_code == 200
    assert page.context["adminform"].form.errors == {"command": [REFUSAL]}
