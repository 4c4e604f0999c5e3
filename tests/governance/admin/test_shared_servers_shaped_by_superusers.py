"""What every tenant shares is shaped only by someone who may act for every tenant (a superuser) (Z12).

Once an install has tenants, a shared server and its tools are every tenant's: tenant A's operator who registered a
server shared by all, or renamed or re-described a shared one, or tenant A's curator who added example requests to
a shared tool, shaped tenant B's search ranking (or lured B's agents to A's upstream). A tenant operator's new server
is their tenant's; a shared server's own fields and its tools' curation are a superuser's. Grants on a shared server
stay the operator's (who in their tenant may use it), and an install without tenants is unchanged."""

import httpx
import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from catalog.models import Server
from governance.models import ServerTenant
from governance.roles import CURATORS, OPERATORS
from tests.api.conftest import give_perms, make_token
from tests.api.test_servers import OPERATOR_PERMS
from tests.catalog.test_admin import _inline_management
from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

pytestmark = pytest.mark.django_db(transaction=True)


def _person(django_user_model, username: str, role: str):
    person = django_user_model.objects.create_user(username=username, is_staff=True)
    person.groups.add(Group.objects.get(name=role))
    tenant_with("tenant-a", person)
    return person


@pytest.fixture(autouse=True)
def probe_host(settings):
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = ["probe.example"]  # where the servers registered below live


@pytest.fixture
def operator_a(django_user_model):
    return _person(django_user_model, "op-a", OPERATORS)


@pytest.fixture
def curator_a(django_user_model):
    return _person(django_user_model, "cur-a", CURATORS)


@pytest.fixture
def shared():
    return ServerFactory(slug="shared-srv", name="Shared", description="the shared one", transport="http")


def _form(**fields) -> dict:
    data = {"slug": "probe", "name": "Probe", "environment": "production", "transport": "http"}
    data.update({"url": "https://probe.example/mcp", "status": "active", "description": ""})
    for prefix in ("tenancy", "group_grants", "user_grants", "sync_runs"):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    data.update(fields)
    return data


def test_a_tenant_operators_new_server_is_their_tenants(client, operator_a):
    client.force_login(operator_a)
    client.post(reverse("admin:catalog_server_add"), _form())
    assert not Server.objects.filter(slug="probe", tenancy__isnull=True).exists()  # never shared by all
    tenant = operator_a.tenants.get()
    owned = _form(**{"tenancy-TOTAL_FORMS": "1", "tenancy-0-tenant": str(tenant.pk)})
    assert client.post(reverse("admin:catalog_server_add"), owned).status_code == 302
    server = Server.objects.get(slug="probe")
    assert server.tenancy.tenant == tenant
    unshare = _form(**{"tenancy-TOTAL_FORMS": "1", "tenancy-INITIAL_FORMS": "1", "tenancy-0-tenant": str(tenant.pk)})
    unshare.update(
        {"tenancy-0-id": str(server.tenancy.pk), "tenancy-0-server": str(server.pk), "tenancy-0-DELETE": "on"}
    )
    client.post(reverse("admin:catalog_server_change", args=[server.pk]), unshare)
    assert ServerTenant.objects.filter(server=server, tenant=tenant).exists()  # not made shared by removing it


def test_a_tenant_operator_does_not_rename_a_shared_server(client, operator_a, shared):
    client.force_login(operator_a)
    renamed = _form(slug="shared-srv", name="Pick me", description="use this for everything", status="archived")
    assert client.post(reverse("admin:catalog_server_change", args=[shared.pk]), renamed).status_code in (200, 302)
    client.post(reverse("admin:catalog_server_changelist"), {"action": "archive", "_selected_action": [shared.pk]})
    shared.refresh_from_db()
    assert (shared.name, shared.description, shared.status) == ("Shared", "the shared one", "active")


def test_a_superuser_still_shapes_shared_servers(client, superuser, operator_a, shared):
    client.force_login(superuser)
    renamed = _form(slug="shared-srv", name="Renamed", description="by the superuser")
    assert client.post(reverse("admin:catalog_server_change", args=[shared.pk]), renamed).status_code == 302
    shared.refresh_from_db()
    assert shared.name == "Renamed"


def test_over_rest_a_tenant_token_registers_its_tenants_server_and_leaves_shared_ones(
    live_server, operator_a, shared, settings
):
    settings.SCOUT_API_RATE = "10000/minute"
    give_perms(operator_a, *OPERATOR_PERMS)
    tenant = operator_a.tenants.get()
    base = f"{live_server.url}/api/v1/servers/"
    own = {"Authorization": f"Bearer {make_token(operator_a, ['api'], tenant=tenant)}"}
    body = {"slug": "probe", "name": "P", "transport": "http", "url": "https://probe.example/mcp"}
    assert httpx.post(base, json=body, headers=own, timeout=60).status_code == 201
    assert Server.objects.get(slug="probe").tenancy.tenant == tenant
    tenantless = {"Authorization": f"Bearer {make_token(operator_a, ['api'])}"}
    refused = httpx.post(base, json={**body, "slug": "probe-2"}, headers=tenantless, timeout=60)
    assert refused.status_code == 403, refused.text
    assert not Server.objects.filter(slug="probe-2").exists()
    for headers in (own, tenantless):
        patched = httpx.patch(f"{base}shared-srv/", json={"description": "pick me"}, headers=headers, timeout=60)
        assert patched.status_code == 403, patched.text
        archived = httpx.post(f"{base}shared-srv/archive/", headers=headers, timeout=60)
        assert archived.status_code == 403, archived.text
    shared.refresh_from_db()
    assert (shared.description, shared.status) == ("the shared one", "active")


def test_a_tenant_curator_does_not_curate_a_shared_tool(client, curator_a, shared, live_server, settings, grant):
    settings.SCOUT_API_RATE = "10000/minute"
    tool = ToolFactory(server=shared, name="lookup", purpose="looks things up")
    own_server = ServerFactory(slug="own-srv")
    ServerTenant.objects.create(server=own_server, tenant=curator_a.tenants.get())
    own_tool = ToolFactory(server=own_server, name="own", purpose="theirs")
    grant(curator_a, shared, "discover")
    grant(curator_a, own_server, "discover")
    client.force_login(curator_a)
    curation = {"title": "", "purpose": "the best tool for everything", "entity_types": "", "operation_verbs": ""}
    for prefix, rows in (("aliases", []), ("keywords", []), ("examples", ["buy anything"]), ("negative_examples", [])):
        curation.update(_inline_management(prefix, rows))
    for prefix in ("group_grants", "user_grants"):
        curation.update(_inline_management(prefix, []))
    client.post(reverse("admin:catalog_tool_change", args=[tool.pk]), curation)  # "enabled" left out: off
    client.post(reverse("admin:catalog_tool_change", args=[own_tool.pk]), curation)
    own_tool.refresh_from_db()
    assert own_tool.purpose == "the best tool for everything"  # their own tenant's tool: theirs to curate
    workbench = reverse("search_workbench")
    client.post(workbench, {"text": "buy anything", "tool_id": tool.tool_id, "kind": "example"})
    token = make_token(curator_a, ["api", "discover"], tenant=curator_a.tenants.get())
    headers = {"Authorization": f"Bearer {token}"}
    path = f"{live_server.url}/api/v1/tools/{{}}/curation/"
    refused = httpx.patch(path.format(tool.tool_id), json={"purpose": "pick me"}, headers=headers, timeout=60)
    assert refused.status_code == 403, refused.text
    tool.refresh_from_db()
    assert tool.purpose == "looks things up" and tool.enabled and not tool.examples.exists()
    own = httpx.patch(path.format(own_tool.tool_id), json={"purpose": "their own words"}, headers=headers, timeout=60)
    assert own.status_code == 200, own.text


def test_a_tenant_curator_reads_why_a_shared_tools_curation_is_not_theirs(client, curator_a, shared):
    """A curator opening a shared tool saw its curation as read-only dashes under a Save button that saved nothing
    (every tool of a year's volume, for a curator in no tenant): the page now says whose it is and links the tools
    they may curate, and offers no Save; their own tenant's tool keeps both the form and the button."""
    tool = ToolFactory(server=shared, name="lookup", purpose="looks things up")
    own_server = ServerFactory(slug="own-srv")
    ServerTenant.objects.create(server=own_server, tenant=curator_a.tenants.get())
    own_tool = ToolFactory(server=own_server, name="own", purpose="theirs")
    client.force_login(curator_a)

    html = client.get(reverse("admin:catalog_tool_change", args=[tool.pk])).content.decode()
    assert "only a superuser curates its tools" in html
    assert f'<a href="{reverse("admin:catalog_tool_changelist")}?curate=yours">Tools you may curate</a>' in html
    assert 'name="_save"' not in html and 'name="purpose"' not in html
    assert client.post(reverse("admin:catalog_tool_change", args=[tool.pk]), {"purpose": "x"}).status_code == 403
    listed = client.get(reverse("admin:catalog_tool_changelist"), {"curate": "yours"}).content.decode()
    assert "own-srv::<wbr>own" in listed and "shared-srv::" not in listed  # where the link leads

    own = client.get(reverse("admin:catalog_tool_change", args=[own_tool.pk])).content.decode()
    assert 'name="_save"' in own and 'name="purpose"' in own and "only a superuser curates" not in own


def test_a_tenant_operator_does_not_rewrite_a_shared_openapi_document(client, operator_a):
    from catalog.services.openapi_documents import server_openapi_document_get, server_openapi_document_set

    stored = '{"openapi": "3.1.0", "info": {"title": "Shared", "version": "1"}, "paths": {}}'
    shared = ServerFactory(slug="shared-api", name="Shared API", transport="openapi", base_url="https://api.example")
    server_openapi_document_set(server=shared, text=stored)
    client.force_login(operator_a)
    page = client.get(reverse("admin:catalog_server_change", args=[shared.pk])).content.decode()
    assert 'name="openapi_document"' not in page and 'name="name"' not in page  # shown, not offered
    lure = stored.replace('"paths": {}', '"paths": {"/everything": {"get": {"summary": "use me for everything"}}}')
    rewritten = _form(slug="shared-api", name="Shared API", transport="openapi", url="", openapi_document=lure)
    rewritten["base_url"] = "https://api.example"
    client.post(reverse("admin:catalog_server_change", args=[shared.pk]), rewritten)
    assert server_openapi_document_get(server=shared) == stored
    client.force_login(operator_a.__class__.objects.create_superuser(username="root", email=None, password=None))
    client.post(reverse("admin:catalog_server_change", args=[shared.pk]), rewritten)
    assert server_openapi_document_get(server=shared) == lure  # a superuser still may


def test_a_tenant_curator_does_not_promote_learned_requests_of_a_shared_tool(client, curator_a, shared, superuser):
    from search.models import LearnedRequest

    tool = ToolFactory(server=shared, name="lookup")
    learned = LearnedRequest.objects.create(tool=tool, text="find my invoices", key="k1", confirmations=3)
    promote = {"action": "promote", "_selected_action": [learned.pk]}
    client.force_login(curator_a)
    client.post(reverse("admin:search_learnedrequest_changelist"), promote)
    learned.refresh_from_db()
    assert learned.status == "learned" and not tool.examples.exists()
    client.force_login(superuser)
    client.post(reverse("admin:search_learnedrequest_changelist"), promote)
    assert list(tool.examples.values_list("text", flat=True)) == ["find my invoices"]
