"""Z12, agents and groups: an admin of tenant A (operator, approver, curator) never reads the name of tenant B's
agent or group, in a list, a page, a search, a choice, an autocomplete, an audit payload, an approval mail or the
approval webhook; they still read their own and shared ones. Superusers read every name. Also the tenant-scoped
policy and review lists (tenant B's tools are not listed) and the query log (who asked, only where visible)."""

import json
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse
from django.utils import timezone

from governance.constants import OTHER_TENANT, OTHER_TENANT_AGENT, OTHER_TENANT_GROUP, OTHER_TENANT_PERSON
from governance.models import AuditEvent, ServerTenant, ToolReview
from governance.roles import APPROVERS, CURATORS, OPERATORS
from governance.services.approvals import approval_request_create
from governance.services.audit import audit_record
from governance.services.tokens import api_token_create, api_token_verify
from tests.governance.factories import ServerFactory, ToolFactory, agent_of, tenant_with

pytestmark = pytest.mark.django_db

B_AGENT = "b-secret-agent"  # tenant B's person's tenant-less agent: its calls are shared rows
B_TENANT_AGENT = "b-tenant-agent"
B_GROUP = "b-payments-team"
B_EMPTY_GROUP = "b-fresh-team"  # no member yet, a grant on tenant B's server only


def _token(user, agent=None, tenant=None):
    _, raw = api_token_create(
        user=user,
        name=f"{user.get_username()} token",
        agent=agent,
        tenant=tenant,
        scopes=["discover", "execute"],
        expires_at=timezone.now() + timedelta(days=1),
    )
    return api_token_verify(raw)


@pytest.fixture
def world(django_user_model, grant, server, mutating_tool, superuser):
    """Tenant A: ann-a (operator and approver), cat-a (curator), alf-a (member of a-team). Tenant B: bob-b (calls
    the shared github server through his tenant-less agent b-secret-agent), bea-b (approver), b-payments-team
    (bob-b) and b-fresh-team (no member, a grant on b-server). Shared: sam (calls through sam-agent)."""
    people = {
        name: django_user_model.objects.create_user(username=name, email=f"{name}@example.com", is_staff=staff)
        for name, staff in (("ann-a", True), ("cat-a", True), ("alf-a", False), ("bob-b", False), ("bea-b", True))
    }
    sam = django_user_model.objects.create_user(username="sam", email="sam@example.com")
    people["ann-a"].groups.add(Group.objects.get(name=OPERATORS))
    people["cat-a"].groups.add(Group.objects.get(name=CURATORS))
    tenant_a = tenant_with("tenant-a", people["ann-a"], people["cat-a"], people["alf-a"])
    tenant_b = tenant_with("tenant-b", people["bob-b"], people["bea-b"])
    b_server = ServerFactory(slug="b-server")
    ServerTenant.objects.create(server=b_server, tenant=tenant_b)
    b_tool = ToolFactory(server=b_server, name="wire_money", description="Wires money.")
    ToolReview.objects.create(tool=b_tool, definition_hash="f" * 64, kind="suspicious")

    a_team = Group.objects.create(name="a-ops-team")
    a_team.user_set.add(people["alf-a"])
    b_team = Group.objects.create(name=B_GROUP)
    b_team.user_set.add(people["bob-b"])
    b_fresh = Group.objects.create(name=B_EMPTY_GROUP)
    Group.objects.create(name="new-team")  # nobody's yet: anyone's to grant
    grant(a_team, server, "discover")
    grant(b_team, server, "discover")  # a shared server: the grant is listed to tenant A, its group is not
    grant(b_fresh, b_server, "discover")
    grant(Group.objects.get(name=APPROVERS), b_server, "approve")  # a role group: every tenant's

    for caller in (people["bob-b"], sam):
        grant(caller, server, "discover", "execute")
    for approver in (people["ann-a"], people["bea-b"]):
        grant(approver, server, "approve")
    agent_of(people["ann-a"], "a-agent", tenant=tenant_a)
    agent_of(people["bob-b"], B_TENANT_AGENT, tenant=tenant_b)
    bob = _token(people["bob-b"], agent_of(people["bob-b"], B_AGENT, all_user_tools=True))
    sam_principal = _token(sam, agent_of(sam, "sam-agent", all_user_tools=True))
    for principal in (bob, sam_principal):
        audit_record(event_type="discovery", principal=principal, tool=mutating_tool, outcome="success", payload={})
    # A superuser issues bob-b a token for his tenant B agent: a shared event naming the agent and tenant B.
    api_token_create(
        user=people["bob-b"],
        name="issued by the platform",
        agent=people["bob-b"].agents.get(name=B_TENANT_AGENT),
        scopes=["discover"],
        expires_at=timezone.now() + timedelta(days=1),
        created_by=superuser,
    )
    return {**people, "sam": sam, "bob": bob, "sam_principal": sam_principal, "b_server": b_server, "b_tool": b_tool}


def _page(client, url, params=None) -> str:
    response = client.get(url, params or {})
    assert response.status_code == 200, url
    return response.content.decode().replace("<wbr>", "")  # an id as read: "wire_<wbr>money" is "wire_money"


def test_the_agent_list_and_the_token_form_offer_no_other_tenants_agent(client, world, superuser):
    client.force_login(world["ann-a"])
    agents = reverse("admin:governance_agent_changelist")
    html = _page(client, agents)
    assert "a-agent" in html and "sam-agent" in html
    assert B_AGENT not in html and B_TENANT_AGENT not in html
    assert B_AGENT not in _page(client, agents, {"q": "b-"})
    token_form = _page(client, reverse("admin:governance_apitoken_add"))
    assert "a-agent" in token_form and "sam-agent" in token_form
    assert B_AGENT not in token_form and B_TENANT_AGENT not in token_form
    _token(world["alf-a"], tenant=world["alf-a"].tenants.get())
    tokens = _page(client, reverse("admin:governance_apitoken_changelist"))
    assert "sam-agent" in tokens and "tenant-a" in tokens  # the tenant filter: the listed tokens' tenants only
    assert B_AGENT not in tokens and "tenant-b" not in tokens

    client.force_login(superuser)
    assert B_AGENT in _page(client, agents) and B_TENANT_AGENT in _page(client, agents)


def test_the_audit_trail_names_no_other_tenants_agent(client, world, superuser):
    client.force_login(world["ann-a"])
    changelist = reverse("admin:governance_auditevent_changelist")
    html = _page(client, changelist)
    assert "sam-agent" in html and OTHER_TENANT_AGENT in html
    assert B_AGENT not in html and B_TENANT_AGENT not in html
    assert "0 audit events" in _page(client, changelist, {"q": B_AGENT})  # not found by its name
    bobs_search = AuditEvent.objects.get(event_type="discovery", human_subject="bob-b")
    html = _page(client, reverse("admin:governance_auditevent_change", args=[bobs_search.pk]))
    assert B_AGENT not in html and f"agent:{OTHER_TENANT_AGENT}" in html
    sams_search = AuditEvent.objects.get(event_type="discovery", human_subject="sam")
    assert "agent:sam-agent" in _page(client, reverse("admin:governance_auditevent_change", args=[sams_search.pk]))

    # The platform issued bob-b a token for his tenant B agent: the event is shared, its payload names neither.
    issued = AuditEvent.objects.get(event_type="token.created", payload__agent=B_TENANT_AGENT)
    assert issued.tenant_scope_id is None and issued.payload["tenant"] == "tenant-b"
    html = _page(client, reverse("admin:governance_auditevent_change", args=[issued.pk]))
    assert B_TENANT_AGENT not in html and "tenant-b" not in html
    assert OTHER_TENANT_AGENT in html and OTHER_TENANT in html

    client.force_login(superuser)
    html = _page(client, reverse("admin:governance_auditevent_change", args=[issued.pk]))
    assert B_TENANT_AGENT in html and "tenant-b" in html
    assert B_AGENT in _page(client, changelist, {"q": B_AGENT})


def test_the_approval_inbox_names_no_other_tenants_agent(client, world, mutating_tool, superuser):
    bobs = approval_request_create(principal=world["bob"], tool=mutating_tool, arguments={"repo": "scout"})
    sams = approval_request_create(principal=world["sam_principal"], tool=mutating_tool, arguments={"repo": "x"})
    client.force_login(world["ann-a"])
    changelist = reverse("admin:governance_approvalrequest_changelist")
    assert B_AGENT not in _page(client, changelist)
    home = _page(client, reverse("admin:index"))  # the approver's panel: who asked, via which agent
    assert "sam via sam-agent" in home and f"{OTHER_TENANT_PERSON} via {OTHER_TENANT_AGENT}" in home
    assert B_AGENT not in home
    html = _page(client, reverse("admin:governance_approvalrequest_decide", args=[bobs.pk]))
    assert f"agent: {OTHER_TENANT_AGENT}" in html and f"agent:{OTHER_TENANT_AGENT}" in html
    assert B_AGENT not in html
    assert "agent: sam-agent" in _page(client, reverse("admin:governance_approvalrequest_decide", args=[sams.pk]))
    assert bobs.approval_id not in _page(client, changelist, {"q": B_AGENT})

    client.force_login(world["bea-b"])  # tenant B's approver reads their own person's agent
    assert f"agent: {B_AGENT}" in _page(client, reverse("admin:governance_approvalrequest_decide", args=[bobs.pk]))
    client.force_login(superuser)
    assert bobs.approval_id in _page(client, changelist, {"q": B_AGENT})


def test_the_approval_mail_and_webhook_name_no_other_tenants_agent(
    world,
    mutating_tool,
    mailoutbox,
    settings,
    receiver,
    django_capture_on_commit_callbacks,
):
    url, received = receiver
    settings.SCOUT_APPROVAL_WEBHOOK_URL = url
    with django_capture_on_commit_callbacks(execute=True):
        approval_request_create(principal=world["bob"], tool=mutating_tool, arguments={"repo": "scout"})
        approval_request_create(principal=world["sam_principal"], tool=mutating_tool, arguments={"repo": "x"})
    mails = {(tuple(mail.to), mail.body.split(" asks ")[0]) for mail in mailoutbox}
    assert mails == {
        (("ann-a@example.com",), f"{OTHER_TENANT_PERSON} via {OTHER_TENANT_AGENT}"),
        (("bea-b@example.com",), f"bob-b via {B_AGENT}"),
        (("ann-a@example.com",), "sam via sam-agent"),  # one mail per tenant set of approvers
        (("bea-b@example.com",), "sam via sam-agent"),
    }
    # One body for everyone a shared request reaches (tenant A's approver as well as tenant B's): bob-b's agent is
    # named to none; a shared person's is.
    bodies = [json.loads(body) for _, body in received]
    assert [(body["requester"], body["agent"]) for body in bodies] == [
        (OTHER_TENANT_PERSON, OTHER_TENANT_AGENT),
        ("sam", "sam-agent"),
    ]
    assert all(B_AGENT not in body.decode() and "bob-b" not in body.decode() for _, body in received)


def test_a_tenants_request_names_its_agent_in_the_webhook(
    world,
    grant,
    mutating_tool,
    settings,
    receiver,
    django_capture_on_commit_callbacks,
):
    """A tenant's request reaches only that tenant's approvers, its own people: the webhook names the agent."""
    url, received = receiver
    settings.SCOUT_APPROVAL_WEBHOOK_URL = url
    alf = world["alf-a"]
    alf_agent = agent_of(alf, "alf-agent", tenant=alf.tenants.get(), all_user_tools=True)
    grant(alf, mutating_tool.server, "discover", "execute")
    with django_capture_on_commit_callbacks(execute=True):
        approval_request_create(principal=_token(alf, alf_agent), tool=mutating_tool, arguments={"repo": "a"})
    ((_, body),) = received
    assert json.loads(body)["requester"] == "alf-a" and json.loads(body)["agent"] == "alf-agent"
    assert json.loads(body)["tenant"] == "tenant-a"


def test_groups_of_another_tenant_are_named_nowhere(client, world, server, mutating_tool, superuser):
    client.force_login(world["ann-a"])
    groups = reverse("admin:auth_group_changelist")
    html = _page(client, groups)
    assert "a-ops-team" in html and "new-team" in html and APPROVERS in html  # a role group serves every tenant
    assert B_GROUP not in html and B_EMPTY_GROUP not in html
    people = _page(client, reverse("admin:auth_user_changelist"))  # its group filter: the listed people's groups
    assert "alf-a" in people and "a-ops-team" in people
    assert "bob-b" not in people and B_GROUP not in people
    autocomplete = _page(
        client,
        reverse("admin:autocomplete"),
        {"app_label": "governance", "model_name": "servergroupobjectpermission", "field_name": "group", "term": "team"},
    )
    assert "a-ops-team" in autocomplete and B_GROUP not in autocomplete
    grants = _page(client, reverse("admin:governance_servergroupobjectpermission_changelist"))
    assert "a-ops-team" in grants and B_GROUP not in grants and B_EMPTY_GROUP not in grants
    server_page = _page(client, reverse("admin:catalog_server_change", args=[server.pk]))
    assert "a-ops-team" in server_page and B_GROUP not in server_page
    policy_page = _page(client, reverse("admin:governance_toolpolicy_change", args=[mutating_tool.policy.pk]))
    assert "group a-ops-team" in policy_page and B_GROUP not in policy_page
    assert "user sam" in policy_page and "bob-b" not in policy_page  # people likewise (the page named them all)

    # The grant to tenant B's group on the shared server is a shared audit event: its holder is not named.
    b_grant = AuditEvent.objects.get(event_type="grant", payload__holder=f"group:{B_GROUP}")
    a_grant = AuditEvent.objects.get(event_type="grant", payload__holder="group:a-ops-team")
    html = _page(client, reverse("admin:governance_auditevent_change", args=[b_grant.pk]))
    assert B_GROUP not in html and f"group:{OTHER_TENANT_GROUP}" in html
    assert "group:a-ops-team" in _page(client, reverse("admin:governance_auditevent_change", args=[a_grant.pk]))

    client.force_login(superuser)
    assert B_GROUP in _page(client, groups) and B_EMPTY_GROUP in _page(client, groups)
    assert f"group:{B_GROUP}" in _page(client, reverse("admin:governance_auditevent_change", args=[b_grant.pk]))


def test_a_grant_form_refuses_another_tenants_group(client, world, server):
    client.force_login(world["ann-a"])
    add = reverse("admin:governance_servergroupobjectpermission_add")
    assert B_GROUP not in _page(client, add)
    execute = _server_permission("execute_server")
    response = client.post(
        add, {"group": Group.objects.get(name=B_GROUP).pk, "permission": execute.pk, "content_object": server.pk}
    )
    assert response.status_code == 200 and "Select a valid choice" in response.content.decode()
    own = client.post(
        add, {"group": Group.objects.get(name="a-ops-team").pk, "permission": execute.pk, "content_object": server.pk}
    )
    assert own.status_code == 302, own.context["adminform"].form.errors


def _server_permission(codename: str):
    from django.contrib.auth.models import Permission

    return Permission.objects.get(content_type__app_label="catalog", codename=codename)


def test_an_entitlement_names_and_keeps_another_tenants_people_and_groups(client, world, superuser):
    from governance.models import Entitlement

    entitlement = Entitlement.objects.create(slug="payments", name="Payments")
    entitlement.users.add(world["bob-b"], world["alf-a"])
    entitlement.groups.add(Group.objects.get(name=B_GROUP), Group.objects.get(name="a-ops-team"))
    client.force_login(world["ann-a"])
    world["ann-a"].user_permissions.add(*_perms("view_entitlement", "change_entitlement"))
    page = reverse("admin:governance_entitlement_change", args=[entitlement.pk])
    html = _page(client, page)
    assert "alf-a" in html and "a-ops-team" in html
    assert "bob-b" not in html and B_GROUP not in html
    response = client.post(
        page,
        {
            "slug": "payments",
            "name": "Payments team",
            "users": [world["alf-a"].pk],
            "groups": [Group.objects.get(name="a-ops-team").pk],
        },
    )
    assert response.status_code == 302
    # Saving kept what the form did not offer; the change's audit event names only what its reader may see.
    assert set(entitlement.users.values_list("username", flat=True)) == {"alf-a", "bob-b"}
    assert set(entitlement.groups.values_list("name", flat=True)) == {"a-ops-team", B_GROUP}
    event = AuditEvent.objects.get(event_type="entitlement.changed")
    assert event.payload["users"] == ["alf-a", "bob-b"]
    html = _page(client, reverse("admin:governance_auditevent_change", args=[event.pk]))
    assert "alf-a" in html and "a-ops-team" in html and "bob-b" not in html and B_GROUP not in html
    client.force_login(superuser)
    html = _page(client, reverse("admin:governance_auditevent_change", args=[event.pk]))
    assert "bob-b" in html and B_GROUP in html


def _perms(*codenames):
    from django.contrib.auth.models import Permission

    return Permission.objects.filter(content_type__app_label="governance", codename__in=codenames)


def test_policies_and_held_changes_of_another_tenants_tools_are_not_listed(client, world, superuser):
    for user in (world["ann-a"], world["cat-a"]):
        client.force_login(user)
        for name in ("toolpolicy", "toolreview"):
            html = _page(client, reverse(f"admin:governance_{name}_changelist"))
            assert "wire_money" not in html and "b-server" not in html, (user, name)
        policy_page = client.get(reverse("admin:governance_toolpolicy_change", args=[world["b_tool"].policy.pk]))
        assert policy_page.status_code == 302  # "doesn't exist", as for an unknown id
    client.force_login(superuser)
    assert "wire_money" in _page(client, reverse("admin:governance_toolpolicy_changelist"))
    assert "wire_money" in _page(client, reverse("admin:governance_toolreview_changelist"))


def test_the_query_log_names_who_asked_only_where_visible(client, world, mutating_tool, superuser):
    from search.usage import query_log_record

    for principal in (world["bob"], world["sam_principal"]):
        query_log_record(principal=principal, query="delete the repo", results=[], confidence="low", degraded=False,
                         backend="bm25", latency_ms=1.0)  # fmt: skip
    client.force_login(world["cat-a"])
    changelist = reverse("admin:search_querylogentry_changelist")
    html = _page(client, changelist)
    assert html.count("delete the repo") == 2 and "sam" in html and OTHER_TENANT_PERSON in html
    assert "bob-b" not in html
    from search.models import QueryLogEntry

    bobs = QueryLogEntry.objects.get(user=world["bob-b"])
    html = _page(client, reverse("admin:search_querylogentry_change", args=[bobs.pk]))
    assert "bob-b" not in html and B_AGENT not in html and OTHER_TENANT_PERSON in html
    client.force_login(superuser)
    assert "bob-b" in _page(client, changelist)


def test_the_query_log_answers_no_lookup_on_who_asked(client, world):
    """The principal key (user id, token, agent name) is never shown, and who asked is shown masked; as query-string
    lookups they told tenant A's curator tenant B's agent's name letter by letter (``principal_key__contains``) and
    which user ids searched (``user``). Each such lookup is a 400, the same bytes for a name or id that has rows and
    one that has none; the list's own filters still work."""
    from search.usage import query_log_record

    query_log_record(principal=world["bob"], query="delete the repo", results=[], confidence="low", degraded=False,
                     backend="bm25", latency_ms=1.0)  # fmt: skip
    bob = world["bob-b"].pk
    client.force_login(world["cat-a"])
    changelist = reverse("admin:search_querylogentry_changelist")
    probes = [
        ("principal_key__contains", B_AGENT, "no-such-agent"),
        ("principal_key__startswith", f"u{bob}|", "u999999|"),
        ("principal_key", "x", "y"),
        ("user", bob, 999999),
        ("user__exact", bob, 999999),
        ("user__in", bob, 999999),
        ("user_id", bob, 999999),
    ]
    for key, there, absent in probes:
        answers = [client.get(changelist, {key: value}) for value in (there, absent)]
        assert [answer.status_code for answer in answers] == [400, 400], key
        assert answers[0].content == answers[1].content, key
    assert client.get(changelist, {"confidence__exact": "low"}).status_code == 200


def test_an_objects_history_names_no_other_tenants_person_or_row(client, world, server, superuser):
    """Django's History page of a shared server: tenant B's operator who changed it is someone in another tenant,
    and the grant rows a change added are not named (they may be another tenant's group's)."""
    from django.contrib.admin.models import CHANGE, LogEntry

    LogEntry.objects.log_actions(
        user_id=world["bea-b"].pk,
        queryset=[server],
        action_flag=CHANGE,
        change_message=[{"added": {"name": "group access", "object": f"github | {B_GROUP} | discover_server"}}],
    )
    LogEntry.objects.log_actions(
        user_id=world["ann-a"].pk,
        queryset=[server],
        action_flag=CHANGE,
        change_message=[{"changed": {"fields": ["Description"]}}],
    )
    history = reverse("admin:catalog_server_history", args=[server.pk])
    client.force_login(world["ann-a"])
    html = _page(client, history)
    assert "bea-b" not in html and B_GROUP not in html
    assert OTHER_TENANT_PERSON in html and "Added group access" in html
    assert "ann-a" in html and "Changed Description." in html
    client.force_login(superuser)
    html = _page(client, history)
    assert "bea-b" in html and B_GROUP in html
