"""``executable_pairs`` (the approver inbox's "still usable" check for a page of requesters, from a fixed number of
queries) answers as ``tools_visible_to(permission="execute")``, the rule's reference, for every principal and tool:
grants direct and through groups, tenants, required entitlements, narrowing agents, scopes, server scopes, held,
disabled and archived tools, inactive people."""

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from catalog.choices import ServerStatus
from governance.models import AgentGrant, ServerTenant
from governance.principals import Principal, principal_for_user
from governance.selectors import tools_visible_to
from governance.selectors.executable import executable_pairs
from tests.governance.factories import (
    EntitlementFactory,
    GroupFactory,
    ServerFactory,
    ToolFactory,
    UserFactory,
    agent_of,
    tenant_with,
)

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(grant):
    shared, acme_server, archived = (ServerFactory(slug=slug) for slug in ("shared", "acme-srv", "old"))
    tools = {
        "open": ToolFactory(server=shared, name="open"),
        "entitled": ToolFactory(server=shared, name="entitled"),
        "held": ToolFactory(server=shared, name="held"),
        "disabled": ToolFactory(server=shared, name="disabled", enabled=False),
        "acme": ToolFactory(server=acme_server, name="acme"),
        "archived": ToolFactory(server=archived, name="archived"),
    }
    secret = EntitlementFactory(slug="secret")
    tools["entitled"].policy.required_entitlements.add(secret)
    tools["held"].policy.held = True
    tools["held"].policy.save()
    archived.status = ServerStatus.ARCHIVED
    archived.save()
    staff, other = GroupFactory(name="staff"), GroupFactory(name="other")
    secret.groups.add(staff)
    ada, bob, cy, dee = (UserFactory(username=name) for name in ("ada", "bob", "cy", "dee"))
    acme = tenant_with("acme", ada, bob)
    ServerTenant.objects.create(server=acme_server, tenant=acme)
    ada.groups.add(staff)
    for server in (shared, archived):
        grant(ada, server)  # discover and execute
    grant(staff, acme_server)
    grant(bob, shared, "discover")
    grant(bob, tools["open"], "execute")  # a tool's grant with its server's discover
    grant(other, acme_server)
    cy.groups.add(other)  # granted on acme's server, not a member of acme
    grant(cy, shared)
    grant(dee, shared)
    dee.is_active = False
    dee.save()
    both = agent_of(ada, "both")
    AgentGrant.objects.create(agent=both, tool=tools["open"], action="discover")
    AgentGrant.objects.create(agent=both, tool=tools["open"], action="execute")
    AgentGrant.objects.create(agent=both, server=acme_server, action="discover")  # no execute there
    looks = agent_of(ada, "looks")
    AgentGrant.objects.create(agent=looks, server=shared, action="discover")
    session = principal_for_user(ada)
    principals = {
        "ada": session,
        "bob": principal_for_user(bob),
        "cy": principal_for_user(cy),
        "dee": principal_for_user(dee),
        "ada narrowed": Principal(**{**session.__dict__, "narrowing_agent_ids": (both.pk,)}),
        "ada looking": Principal(**{**session.__dict__, "narrowing_agent_ids": (looks.pk,)}),
        "ada no execute": Principal(**{**session.__dict__, "scopes": frozenset({"discover"})}),
        "ada on acme's server": Principal(**{**session.__dict__, "scopes": session.scopes | {"server:acme-srv"}}),
        "ada shared only": Principal(**{**session.__dict__, "tenant_ids": frozenset(), "tenant_id": None}),
        "gone": None,
    }
    return principals, tools


def test_answers_as_the_visibility_selector_for_every_principal_and_tool(world):
    principals, tools = world
    pks = {tool.pk for tool in tools.values()}
    expected = set()
    for key, principal in principals.items():
        if principal is not None:
            visible = tools_visible_to(principal=principal, permission="execute").filter(pk__in=pks)
            expected |= {(key, pk) for pk in visible.values_list("pk", flat=True)}
    with CaptureQueriesContext(connection) as queries:
        found = executable_pairs(principals, {key: set(pks) for key in principals})
    assert found == expected
    names = {tool.pk: name for name, tool in tools.items()}
    assert sorted((key, names[pk]) for key, pk in found) == [
        ("ada", "acme"), ("ada", "entitled"), ("ada", "open"),
        ("ada narrowed", "open"),
        ("ada on acme's server", "acme"),
        ("ada shared only", "entitled"), ("ada shared only", "open"),
        ("bob", "open"),
        ("cy", "open"),
    ]  # fmt: skip
    assert len(queries) <= 12  # a fixed few, however many principals


def test_reads_the_same_number_of_queries_for_more_principals(world):
    principals, tools = world
    pks = {tool.pk for tool in tools.values()}
    few = {key: principals[key] for key in ("ada", "ada narrowed")}
    with CaptureQueriesContext(connection) as one:
        executable_pairs(few, {key: set(pks) for key in few})
    with CaptureQueriesContext(connection) as every:
        executable_pairs(principals, {key: set(pks) for key in principals})
    assert len(every) == len(one)
