"""Z12 in the admin: an operator of tenant A manages shared servers and tenant A's, never tenant B's (not in a
list, not on a page, not in a grant), and reads only shared and tenant A's audit events."""

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse

from governance.models import AuditEvent, ServerTenant, ServerUserObjectPermission
from governance.roles import OPERATORS
from governance.services.audit import audit_record
from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model, member, outsider):
    operator = django_user_model.objects.create_user(username="op-a", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    tenant_a, tenant_b = tenant_with("tenant-a", operator, member), tenant_with("tenant-b", outsider)
    servers = {}
    for slug, tenant in (("shared-srv", None), ("alpha-srv", tenant_a), ("bravo-srv", tenant_b)):
        server = ServerFactory(slug=slug)
        if tenant is not None:
            ServerTenant.objects.create(server=server, tenant=tenant)
        ToolFactory(server=server, name=f"{slug.split('-')[0]}_tool")
        servers[slug] = server
    return {"operator": operator, "a": tenant_a, "b": tenant_b, **servers}


def test_operator_sees_shared_and_own_tenants_servers_and_tools_only(client, world):
    client.force_login(world["operator"])
    servers = client.get(reverse("admin:catalog_server_changelist")).content.decode()
    tools = client.get(reverse("admin:catalog_tool_changelist")).content.decode()
    for page in (servers, tools):
        assert "shared" in page and "alpha" in page
        assert "bravo" not in page
    foreign = client.get(reverse("admin:catalog_server_change", args=[world["bravo-srv"].pk]))
    assert foreign.status_code == 302  # the admin's answer for an object that does not exist for you
    assert "bravo" not in client.get(foreign["Location"], follow=True).content.decode()


def test_operator_cannot_grant_another_tenants_server(client, world, member):
    client.force_login(world["operator"])
    discover = Permission.objects.get(codename="discover_server")
    url = reverse("admin:governance_serveruserobjectpermission_add")
    refused = client.post(url, {"user": member.pk, "permission": discover.pk, "content_object": world["bravo-srv"].pk})
    assert refused.status_code == 200 and "no such server" in refused.content.decode()
    assert not ServerUserObjectPermission.objects.exists()
    granted = client.post(url, {"user": member.pk, "permission": discover.pk, "content_object": world["alpha-srv"].pk})
    assert granted.status_code == 302
    assert ServerUserObjectPermission.objects.filter(content_object=world["alpha-srv"], user=member).exists()


def test_operator_reads_shared_and_own_tenants_audit_events(client, world):
    for slug in ("shared-srv", "alpha-srv", "bravo-srv"):
        tool = world[slug].tools.get()
        audit_record(event_type="review.held", principal=None, tool=tool, outcome="success", payload={})
    client.force_login(world["operator"])
    page = client.get(reverse("admin:governance_auditevent_changelist")).content.decode()
    assert "shared-srv::shared_tool" in page and "alpha-srv::alpha_tool" in page
    assert "bravo" not in page  # neither a row nor a filter choice names it
    bravo = AuditEvent.objects.get(target_server="bravo-srv")
    alpha = AuditEvent.objects.get(target_server="alpha-srv")
    assert client.get(reverse("admin:governance_auditevent_change", args=[alpha.pk])).status_code == 200
    assert client.get(reverse("admin:governance_auditevent_change", args=[bravo.pk])).status_code == 302


def test_operators_home_and_dashboard_show_no_other_tenants_servers_or_tools(client, world):
    for slug in ("alpha-srv", "bravo-srv"):
        tool = world[slug].tools.get()
        audit_record(event_type="execution", principal=None, tool=tool, outcome="success", payload={"duration_ms": 5})
    client.force_login(world["operator"])
    home = client.get(reverse("admin:index")).content.decode()
    assert "alpha-srv" in home and "bravo" not in home
    figures = client.get(reverse("dashboard_data")).json()
    assert figures["top_tools"] == [["alpha-srv::alpha_tool", 1]]
    assert sum(figures["servers"].values()) == 2  # shared and alpha, not bravo


def _form_fields(html: str) -> dict[str, str]:
    """The values a browser would submit from the page's change form (inputs, selected options, textareas)."""
    from html.parser import HTMLParser

    class Fields(HTMLParser):
        def __init__(self) -> None:
            super().__init__()
            self.values: dict[str, str] = {}
            self.select: str | None = None
            self.textarea: str | None = None

        def handle_starttag(self, tag, attrs) -> None:
            attrs = dict(attrs)
            if tag == "input" and attrs.get("name") and attrs.get("type") not in ("submit", "checkbox"):
                self.values[attrs["name"]] = attrs.get("value") or ""
            elif tag == "input" and attrs.get("type") == "checkbox" and "checked" in attrs:
                self.values[attrs["name"]] = attrs.get("value") or "on"
            elif tag == "select":
                self.select = attrs.get("name")
                self.values.setdefault(self.select, "")
            elif tag == "option" and self.select and "selected" in attrs:
                self.values[self.select] = attrs.get("value") or ""
            elif tag == "textarea":
                self.textarea = attrs.get("name")
                self.values[self.textarea] = ""

        def handle_endtag(self, tag) -> None:
            if tag == "select":
                self.select = None
            elif tag == "textarea":
                self.textarea = None

        def handle_data(self, data) -> None:
            if self.textarea:
                self.values[self.textarea] += data

    parser = Fields()
    parser.feed(html)
    return parser.values


def test_a_tenants_tool_is_granted_on_its_page_only_to_that_tenants_members(
    client, world, member, outsider, django_user_model
):
    """Z12 with main's per-tool access: the tool page's access rows refuse a person outside the tool's tenant
    (the form says so; nothing is granted), and accept a member. Another tenant's person is not even a choice
    (the operator's people list has none of them); a shared person (in no tenant) is, and the grant refuses."""
    from governance.models import ToolUserObjectPermission

    shared_person = django_user_model.objects.create_user(username="shared-person")

    tool = world["alpha-srv"].tools.get()
    client.force_login(world["operator"])
    url = reverse("admin:catalog_tool_change", args=[tool.pk])
    fields = _form_fields(client.get(url).content.decode())
    row = "user_grants"  # the people's access rows of the tool page
    assert f"{row}-0-user" in fields
    discover = Permission.objects.get(codename="discover_tool")

    refused = client.post(url, {**fields, f"{row}-0-user": shared_person.pk, f"{row}-0-permission": discover.pk})
    assert refused.status_code == 200
    assert "this server belongs to a tenant the person is not a member of" in refused.content.decode()
    foreign = client.post(url, {**fields, f"{row}-0-user": outsider.pk, f"{row}-0-permission": discover.pk})
    assert foreign.status_code == 200 and "Select a valid choice" in foreign.content.decode()
    assert not ToolUserObjectPermission.objects.exists()

    granted = client.post(url, {**fields, f"{row}-0-user": member.pk, f"{row}-0-permission": discover.pk})
    assert granted.status_code == 302
    assert ToolUserObjectPermission.objects.filter(content_object=tool, user=member).exists()


def test_curators_preview_and_example_check_stay_inside_their_tenants(client, world, outsider):
    from governance.roles import CURATORS
    from search.preview import visible_tool_pks

    curator = world["operator"]
    curator.groups.add(Group.objects.get(name=CURATORS))
    bravo_tool = world["bravo-srv"].tools.get()
    # "Every tool some client may get" and "as a user of tenant B" both stop at the curator's tenants.
    every = visible_tool_pks(as_user=None, viewer=curator)
    assert {world[s].tools.get().pk for s in ("shared-srv", "alpha-srv")} <= every
    assert bravo_tool.pk not in every
    platform = type(curator).objects.create_superuser(username="platform", email=None, password=None)  # no hashing
    assert bravo_tool.pk in visible_tool_pks(as_user=None, viewer=platform)  # the control: it is servable
    ServerUserObjectPermission.objects.create(
        user=outsider, permission=Permission.objects.get(codename="discover_server"), content_object=world["bravo-srv"]
    )
    assert bravo_tool.pk not in visible_tool_pks(as_user=outsider, viewer=curator)
    client.force_login(curator)
    assert client.get(reverse("search_preview_tool", args=[bravo_tool.pk])).status_code == 404
    alpha_tool = world["alpha-srv"].tools.get()
    assert client.get(reverse("search_preview_tool", args=[alpha_tool.pk])).status_code == 200


@pytest.fixture
def people(django_user_model, world):
    """A person of each tenant and one in none (shared), with names no page prints otherwise."""
    made = {name: django_user_model.objects.create_user(username=name) for name in ("alice-a", "bob-b", "sam-shared")}
    world["a"].members.add(made["alice-a"])
    world["b"].members.add(made["bob-b"])
    return made


def test_operator_lists_and_autocompletes_only_shared_and_own_tenants_people(client, world, people, superuser):
    client.force_login(world["operator"])
    listed = client.get(reverse("admin:auth_user_changelist"))
    assert listed.status_code == 200
    page = listed.content.decode()
    assert "alice-a" in page and "sam-shared" in page and "op-a" in page
    assert "bob-b" not in page
    assert client.get(reverse("admin:auth_user_change", args=[people["bob-b"].pk])).status_code == 302
    for model_name in ("serveruserobjectpermission", "apitoken", "agent"):
        found = client.get(
            reverse("admin:autocomplete"),
            {"app_label": "governance", "model_name": model_name, "field_name": "user", "term": ""},
        )
        assert found.status_code == 200, model_name
        names = {row["text"] for row in found.json()["results"]}
        assert {"alice-a", "sam-shared", "op-a"} <= names and "bob-b" not in names, (model_name, names)
    searched = client.get(
        reverse("admin:autocomplete"),
        {"app_label": "governance", "model_name": "serveruserobjectpermission", "field_name": "user", "term": "bob"},
    )
    assert searched.json()["results"] == []

    client.force_login(superuser)  # a superuser sees everyone
    assert "bob-b" in client.get(reverse("admin:auth_user_changelist")).content.decode()


def test_operator_cannot_pick_another_tenants_person_in_a_grant(client, world, people):
    """A person posted from outside the operator's list is an invalid choice, even on a shared server."""
    client.force_login(world["operator"])
    discover = Permission.objects.get(codename="discover_server")
    url = reverse("admin:governance_serveruserobjectpermission_add")
    shared = world["shared-srv"].pk
    refused = client.post(url, {"user": people["bob-b"].pk, "permission": discover.pk, "content_object": shared})
    assert refused.status_code == 200 and "Select a valid choice" in refused.content.decode()
    assert not ServerUserObjectPermission.objects.exists()
    granted = client.post(url, {"user": people["sam-shared"].pk, "permission": discover.pk, "content_object": shared})
    assert granted.status_code == 302


def test_a_tenants_member_choices_hold_no_other_tenants_people(client, world, people):
    world["operator"].user_permissions.add(Permission.objects.get(codename="change_tenant"))
    client.force_login(world["operator"])
    page = client.get(reverse("admin:governance_tenant_change", args=[world["a"].pk])).content.decode()
    assert "alice-a" in page and "sam-shared" in page
    assert "bob-b" not in page


def test_a_curator_previews_only_as_shared_or_own_tenants_people(client, world, people):
    from governance.roles import CURATORS

    curator = world["operator"]
    curator.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(curator)
    alpha_tool = world["alpha-srv"].tools.get()
    for name, known in (("alice-a", True), ("sam-shared", True), ("bob-b", False)):
        preview = client.get(reverse("search_preview"), {"query": "alpha tool", "as_user": name})
        assert ("No such user." in preview.context["form"].errors.get("as_user", [])) is not known, name
        examples = client.get(reverse("search_preview_tool", args=[alpha_tool.pk]), {"as_user": name})
        assert examples.status_code == (200 if known else 404), name


@pytest.fixture
def shared_grants(world, people, django_user_model):
    """Discover on the shared server and its tool for a person of each tenant and a shared one; bob-b's grants
    made by tenant B's operator (whose name no page of tenant A's operator may print either)."""
    from governance.models import ToolUserObjectPermission

    op_b = django_user_model.objects.create_user(username="op-bravo", is_staff=True)
    world["b"].members.add(op_b)
    server = world["shared-srv"]
    tool = server.tools.get()
    discover_server = Permission.objects.get(codename="discover_server")
    discover_tool = Permission.objects.get(codename="discover_tool")
    for name in ("alice-a", "sam-shared", "bob-b"):
        granter = op_b if name in ("bob-b", "sam-shared") else None
        ServerUserObjectPermission.objects.create(
            user=people[name], permission=discover_server, content_object=server, granted_by=granter
        )
        ToolUserObjectPermission.objects.create(
            user=people[name], permission=discover_tool, content_object=tool, granted_by=granter
        )
    return {"server": server, "tool": tool}


def test_a_shared_servers_grants_name_no_other_tenants_people(client, world, people, shared_grants, superuser):
    """On a shared server's and tool's page and in the grant lists an operator of tenant A reads the holders of
    their tenants and shared ones; tenant B's holders (and who granted them) are left out, not even counted, as
    everywhere else tenant B's people do not exist for them. Saving the page leaves tenant B's grants alone."""
    client.force_login(world["operator"])
    server_page = reverse("admin:catalog_server_change", args=[shared_grants["server"].pk])
    pages = {
        "server": server_page,
        "tool": reverse("admin:catalog_tool_change", args=[shared_grants["tool"].pk]),
        "server grants": reverse("admin:governance_serveruserobjectpermission_changelist"),
        "tool grants": reverse("admin:governance_tooluserobjectpermission_changelist"),
    }
    for name, url in pages.items():
        page = client.get(url)
        assert page.status_code == 200, name
        html = page.content.decode()
        assert "alice-a" in html and "sam-shared" in html, name
        assert "bob-b" not in html and "op-bravo" not in html, name
    granters = client.get(pages["server grants"]).content.decode()
    assert "someone in another tenant" in granters  # sam-shared's grant, made by tenant B's operator
    bob_grant = ServerUserObjectPermission.objects.get(user=people["bob-b"])
    bob_grant_page = reverse("admin:governance_serveruserobjectpermission_change", args=[bob_grant.pk])
    assert client.get(bob_grant_page).status_code == 302  # the admin's answer for a row that is not yours

    fields = _form_fields(client.get(server_page).content.decode())
    saved = client.post(server_page, fields)
    assert saved.status_code == 302, saved.content.decode()[:2000]
    assert ServerUserObjectPermission.objects.filter(content_object=shared_grants["server"]).count() == 3

    client.force_login(superuser)  # the platform's operator sees every holder and granter
    html = client.get(server_page).content.decode()
    assert "bob-b" in html
    assert "op-bravo" in client.get(pages["server grants"]).content.decode()


def test_tenantless_tokens_and_agents_name_no_other_tenants_people(client, world, people, django_user_model):
    """A token or agent in no tenant is shared, but its person may be tenant B's: an operator of tenant A does not
    see that row (not listed, its page not found, not counted), and a shared person's token made or revoked by
    tenant B's operator shows them as someone in another tenant."""
    from datetime import timedelta

    from django.utils import timezone

    from governance.models import Agent, ApiToken
    from governance.services.tokens import api_token_create, api_token_revoke

    op_b = django_user_model.objects.create_user(username="op-bravo", is_staff=True)
    world["b"].members.add(op_b)
    expires = timezone.now() + timedelta(days=1)
    tokens = {
        name: api_token_create(user=people[name], name=f"{name}-token", scopes=["discover"], expires_at=expires)[0]
        for name in ("bob-b", "sam-shared")
    }
    # Issued by op_b before only superusers issued tokens for others: such rows remain, and are shown the same way.
    ApiToken.objects.filter(pk__in=[token.pk for token in tokens.values()]).update(created_by=op_b)
    api_token_revoke(token=tokens["sam-shared"], actor=op_b)
    agents = {name: Agent.objects.create(user=people[name], name=f"{name}-agent") for name in ("bob-b", "sam-shared")}

    client.force_login(world["operator"])
    for model in ("apitoken", "agent"):
        listed = client.get(reverse(f"admin:governance_{model}_changelist"))
        assert listed.status_code == 200, model
        html = listed.content.decode()
        assert "sam-shared" in html, model
        assert "bob-b" not in html and "op-bravo" not in html, model
    for model, rows in (("apitoken", tokens), ("agent", agents)):
        assert client.get(reverse(f"admin:governance_{model}_change", args=[rows["bob-b"].pk])).status_code == 302
    shared_token = client.get(reverse("admin:governance_apitoken_change", args=[tokens["sam-shared"].pk]))
    assert shared_token.status_code == 200
    html = shared_token.content.decode()
    assert "sam-shared" in html and "op-bravo" not in html
    assert html.count("someone in another tenant") == 2  # who created it and who revoked it
    assert 'name="created_by"' not in html and 'name="revoked_by"' not in html  # read-only, never a choice


def test_alternatives_offer_no_other_tenants_server_and_a_shared_servers_are_a_superusers(client, world, superuser):
    """Servers marked alternatives publish copies unheld (search capture): tenant A's operator marks them on their
    own server among the servers they know (shared and A's; tenant B's does not exist for them), and may neither
    read nor set a shared server's (they shape every tenant's holds; a superuser may have named B's server)."""
    world["shared-srv"].alternatives.add(world["bravo-srv"])
    client.force_login(world["operator"])
    own = client.get(reverse("admin:catalog_server_change", args=[world["alpha-srv"].pk])).content.decode()
    offered = own.split('name="alternatives"', 1)[1].split("</select>", 1)[0]
    assert "shared-srv" in offered and "bravo" not in offered
    assert "alpha-srv" not in offered  # the server itself is no alternative to itself
    shared = client.get(reverse("admin:catalog_server_change", args=[world["shared-srv"].pk])).content.decode()
    assert 'name="alternatives"' not in shared and "bravo" not in shared
    client.force_login(superuser)
    shared = client.get(reverse("admin:catalog_server_change", args=[world["shared-srv"].pk])).content.decode()
    assert "bravo-srv" in shared.split('name="alternatives"', 1)[1].split("</select>", 1)[0]
