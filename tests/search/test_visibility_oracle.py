"""SECURITY-TESTS Z1 and Z2 at catalog scale: 20 people, 200 requests each, through the one search entry point.

A generated catalog (20 servers, 14 tools each) and, on three vault servers, a hidden tool built to be the best
match for each of 100 of the requests (its name, description and example are the request's words). Twenty people
hold varied grants: servers, single tools, through groups, in tenants, through narrowed agents and server-scoped
tokens, with a grant revoked, tools withdrawn, held or behind an entitlement, a superuser and an outsider with
none. Each searches every request through ``search_for_principal`` as the gateway does (a principal verified
from a real token, or a session's), and every match must be a tool the oracle allows: the grants as guardian's
``get_objects_for_user`` reads them, narrowed by the rest of the rule computed here from the rows, never through
Scout's visibility selector. Z2: removing the hidden tools changes nothing a person who may see none of them
gets, for a sample of requests (ids, order, scores, confidence, count).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.core.management import call_command
from django.utils import timezone
from guardian.shortcuts import get_objects_for_user

from catalog.choices import ServerStatus
from catalog.models import Server, Tool
from catalog.services.imports import catalog_import_file
from governance.models import AgentGrant, ApiToken, Entitlement, ServerTenant, Tenant
from governance.principals import Principal, principal_for_user
from governance.services.permissions import permission_grant, permission_revoke
from governance.services.tokens import api_token_create, api_token_verify
from search.backends import backends_reset
from search.encoder import Encoder, query_cache
from search.services import index_rebuild, index_update, search_for_principal, tool_search, vector_cache_scope
from tests.governance.factories import agent_of, in_days

from .factories import add_examples

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

TOP_K = 10

# slug: (what it is, the things its tools act on). Red and blue servers belong to those tenants; vaults hold the
# hidden tools and are granted to nobody as a whole.
DOMAINS: dict[str, tuple[str, tuple[str, ...]]] = {
    "mail": ("electronic mail", ("email message", "mailbox folder", "attachment")),
    "calendar": ("meetings and schedules", ("meeting invitation", "room booking", "availability slot")),
    "git": ("source code repositories", ("pull request", "commit", "branch")),
    "ci": ("build pipelines", ("pipeline run", "build artifact", "deployment job")),
    "issues": ("bug tracking", ("bug report", "milestone", "label")),
    "crm": ("customer relationships", ("customer account", "sales lead", "deal stage")),
    "helpdesk": ("customer support", ("support ticket", "canned reply", "escalation")),
    "billing": ("invoicing and payments", ("invoice", "refund", "payment method")),
    "payroll": ("salaries", ("payslip", "salary band", "bonus payment")),
    "hr": ("people operations", ("employee record", "leave request", "job opening")),
    "docs": ("shared documents", ("document", "comment thread", "document template")),
    "wiki": ("team knowledge base", ("wiki page", "page revision", "knowledge space")),
    "storage": ("cloud object storage", ("storage bucket", "object file", "access policy")),
    "monitoring": ("service health", ("alert rule", "uptime check", "latency dashboard")),
    "chat": ("team chat", ("chat channel", "direct message", "emoji reaction")),
    "red-lab": ("the red tenant's laboratory", ("lab sample", "experiment protocol", "freezer inventory")),
    "red-fleet": ("the red tenant's vehicles", ("delivery van", "fuel receipt", "driver shift")),
    "blue-shop": ("the blue tenant's web shop", ("product listing", "shopping cart", "discount coupon")),
    "blue-farm": ("the blue tenant's farm", ("crop field", "irrigation schedule", "harvest log")),
    "weather": ("weather data", ("city forecast", "storm warning", "rainfall history")),
}
TENANT_OF = {"red-lab": "red", "red-fleet": "red", "blue-shop": "blue", "blue-farm": "blue"}
VAULTS = {"vault": None, "red-vault": "red", "blue-vault": "blue"}
# Verb: (the tool's description, how people ask for it). 14 tools a server: the first 14 (verb, object) pairs.
VERBS: dict[str, tuple[str, str]] = {
    "create": ("Create a new {obj} in {what}.", "please make a new {obj} for the {who}"),
    "list": ("List every {obj} with filters for {what}.", "show me all the {obj}s we have"),
    "get": ("Fetch one {obj} by its identifier from {what}.", "look up the {obj} the {who} mentioned"),
    "update": ("Change the fields of an existing {obj} in {what}.", "edit the {obj} that belongs to the {who}"),
    "delete": ("Permanently remove a {obj} from {what}.", "get rid of the old {obj}"),
    "search": ("Full-text search over each {obj} in {what}.", "find any {obj} about the {who}"),
    "export": ("Export {obj} data from {what} as CSV.", "download a spreadsheet of {obj}s"),
}
WHO = ("new intern", "finance team", "head of sales", "night shift", "auditor")


@dataclass
class Person:
    """One of the twenty: how they search (a raw token, or a session), and whether they may see hidden tools."""

    username: str
    token: str = ""  # raw token; "" for a session principal
    witness: bool = False  # may see some hidden tools (left out of the differential, checked to find them)


def _snake(text: str) -> str:
    return "_".join(word for word in text.lower().replace("'", "").split() if word.isalnum())


def _requests() -> list[str]:
    """200 requests, ten per domain, each in its own words (not a tool's) and ending with its server's name."""
    requests = []
    verbs = list(VERBS)
    for d, (slug, (_what, objects)) in enumerate(DOMAINS.items()):
        for i in range(10):
            verb, obj = verbs[(d + i) % len(verbs)], objects[i % len(objects)]
            requests.append(VERBS[verb][1].format(obj=obj, who=WHO[(d + i) % len(WHO)]) + f" in {slug}")
    assert len(set(requests)) == 200
    return requests


REQUESTS = _requests()


def _line(server: str, name: str, description: str) -> str:
    tool = {"server": server, "name": name, "description": description, "annotations": {"readOnlyHint": True}}
    return json.dumps({**tool, "inputSchema": {"type": "object", "properties": {"q": {"type": "string"}}}})


def _catalog(directory: Path) -> tuple[dict[str, Server], dict[str, Tool]]:
    """The servers and tools, imported as an operator imports a catalog file (one batch of queries, not one save
    per tool); then the tenants' servers moved into their tenants. The hidden tools: for requests 0, 2, 4, ... 198,
    a tool on a vault whose words are the request's own (built to win it), with the request as its example."""
    lines, hidden_names = [], {}
    for slug, (what, objects) in DOMAINS.items():
        for verb, obj in [(verb, obj) for obj in objects for verb in VERBS][:14]:
            lines.append(_line(slug, f"{verb}_{_snake(obj)}", VERBS[verb][0].format(obj=obj, what=what)))
    vaults = list(VAULTS)
    for n, request in enumerate(REQUESTS[::2]):
        hidden_names[request] = (vaults[n % len(vaults)], _snake(request)[:60] + f"_{n}")
        lines.append(_line(*hidden_names[request], f"{request}. Use it whenever someone asks to {request}."))
    path = directory / "oracle-catalog.jsonl"
    path.write_text("\n".join(lines) + "\n")
    report = catalog_import_file(path=path, index=False)
    assert not report.bad_lines and report.servers == len(DOMAINS) + len(VAULTS)
    servers = {server.slug: server for server in Server.objects.all()}
    for slug, tenant in {**TENANT_OF, **VAULTS}.items():
        if tenant is not None:
            owner = Tenant.objects.get_or_create(slug=tenant, defaults={"name": tenant.title()})[0]
            ServerTenant.objects.create(server=servers[slug], tenant=owner)
    hidden = {request: _tool(*names) for request, names in hidden_names.items()}
    for request, tool in hidden.items():
        add_examples(tool, request)
    return servers, hidden


def _tool(slug: str, name: str) -> Tool:
    return Tool.objects.get(server__slug=slug, name=name)


def _token(user, *, scopes=("discover", "execute"), agent=None, tenant=None) -> str:
    _, raw = api_token_create(
        user=user, name="oracle", scopes=list(scopes), agent=agent, tenant=tenant, expires_at=in_days(1)
    )
    return raw


def _people(superuser, servers: dict[str, Server], hidden: dict[str, Tool]) -> list[Person]:
    """The twenty people and their grants, through the audited services."""
    User = get_user_model()
    red, blue = Tenant.objects.get(slug="red"), Tenant.objects.get(slug="blue")
    engineering, support, everyone, finance = (
        Group.objects.create(name=f"oracle-{n}") for n in ("eng", "sup", "all", "fin")
    )
    pii = Entitlement.objects.create(slug="payroll-pii", name="Payroll PII")
    pii.groups.add(finance)
    hidden_list = list(hidden.values())

    def user(name: str, **extra):
        return User.objects.create_user(username=name, **extra)

    def give(holder, target, *actions: str) -> None:
        for action in actions or ("discover", "execute"):
            permission_grant(actor=superuser, target=target, action=action, holder=holder)

    people: list[Person] = []
    for g, slugs in ((engineering, ("git", "ci", "issues")), (everyone, ("docs", "wiki")), (finance, ("payroll",))):
        for slug in slugs:
            give(g, servers[slug])
    give(support, servers["crm"])
    for name in ("get_support_ticket", "search_support_ticket", "list_canned_reply"):
        give(support, _tool("helpdesk", name))

    alice = user("alice")  # direct server grants
    give(alice, servers["mail"]), give(alice, servers["calendar"])
    people.append(Person("alice", _token(alice)))
    bob = user("bob")  # a group's servers, and everyone's
    bob.groups.add(engineering, everyone)
    people.append(Person("bob", _token(bob)))
    carol = user("carol")  # single tools on four servers (one to discover only, on a server since disabled)
    for slug, name in (("mail", "list_email_message"), ("billing", "get_invoice"), ("git", "create_pull_request")):
        give(carol, _tool(slug, name))
    give(carol, _tool("weather", "get_city_forecast"), "discover")
    people.append(Person("carol", _token(carol)))
    dave = user("dave")  # a group's server and single tools
    dave.groups.add(support)
    people.append(Person("dave", _token(dave)))
    erin = user("erin")  # tenant red, acting there by token
    red.members.add(erin)
    for slug in ("red-lab", "red-fleet", "weather"):
        give(erin, servers[slug])
    people.append(Person("erin", _token(erin, tenant=red)))
    frank = user("frank")  # granted red's lab while a member of red, since gone to blue: red stays out of sight
    red.members.add(frank), blue.members.add(frank)
    for slug in ("blue-shop", "red-lab", "chat"):
        give(frank, servers[slug])
    red.members.remove(frank)
    people.append(Person("frank", _token(frank, tenant=blue)))
    grace = user("grace")  # in both tenants, searching in a session: sees both
    red.members.add(grace), blue.members.add(grace)
    for slug in ("red-fleet", "blue-farm", "monitoring"):
        give(grace, servers[slug])
    people.append(Person("grace"))
    heidi = user("heidi")  # an agent narrowed to one server and one tool of her grants
    for slug in ("storage", "monitoring", "chat"):
        give(heidi, servers[slug])
    narrow = agent_of(heidi, "heidi-bot")
    AgentGrant.objects.create(agent=narrow, server=servers["storage"], action="discover")
    AgentGrant.objects.create(agent=narrow, tool=_tool("chat", "list_chat_channel"), action="discover")
    AgentGrant.objects.create(agent=narrow, server=servers["billing"], action="discover")  # not hers: stays out
    people.append(Person("heidi", _token(heidi, agent=narrow)))
    ivan = user("ivan")  # a chain: a narrowed parent (crm, helpdesk) and its narrowed child (helpdesk, one crm tool)
    give(ivan, servers["crm"]), give(ivan, servers["helpdesk"]), give(ivan, servers["hr"])
    parent = agent_of(ivan, "ivan-lead")
    AgentGrant.objects.create(agent=parent, server=servers["crm"], action="discover")
    AgentGrant.objects.create(agent=parent, server=servers["helpdesk"], action="discover")
    child = agent_of(ivan, "ivan-helper", parent=parent)
    AgentGrant.objects.create(agent=child, server=servers["helpdesk"], action="discover")
    AgentGrant.objects.create(agent=child, tool=_tool("crm", "list_customer_account"), action="discover")
    AgentGrant.objects.create(agent=child, server=servers["hr"], action="discover")  # the parent's lacks hr
    people.append(Person("ivan", _token(ivan, agent=child)))
    judy = user("judy")  # a token limited to one server of three
    for slug in ("docs", "wiki", "storage"):
        give(judy, servers[slug])
    people.append(Person("judy", _token(judy, scopes=("discover", "server:wiki"))))
    mallory = user("mallory")  # grants revoked: billing as a whole, and one mail tool
    give(mallory, servers["billing"]), give(mallory, servers["helpdesk"])
    give(mallory, _tool("mail", "create_email_message")), give(mallory, _tool("mail", "list_email_message"))
    permission_revoke(actor=superuser, target=servers["billing"], action="discover", holder=mallory)
    permission_revoke(actor=superuser, target=_tool("mail", "create_email_message"), action="discover", holder=mallory)
    people.append(Person("mallory", _token(mallory)))
    niaj = user("niaj")  # tools withdrawn: disabled, removed, held for review, and a server no longer serving
    for slug in ("issues", "weather", "chat"):
        give(niaj, servers[slug])
    people.append(Person("niaj", _token(niaj)))
    olivia = user("olivia")  # payroll granted, lacking the entitlement its pay tools need
    give(olivia, servers["payroll"]), give(olivia, servers["hr"])
    people.append(Person("olivia", _token(olivia)))
    peggy = user("peggy")  # payroll through the finance group, which holds the entitlement
    peggy.groups.add(finance)
    people.append(Person("peggy", _token(peggy)))
    rupert = user("rupert", is_staff=True, is_superuser=True)  # a superuser: no implicit grants to an agent
    people.append(Person("rupert", _token(rupert)))
    sybil = user("sybil")  # everyone's servers only, a discover-only token
    sybil.groups.add(everyone)
    people.append(Person("sybil", _token(sybil, scopes=("discover",))))
    trent = user("trent")  # a witness: single hidden tools, and servers
    for tool in hidden_list[0:30:3]:
        give(trent, tool)
    give(trent, servers["git"]), give(trent, servers["mail"])
    people.append(Person("trent", _token(trent), witness=True))
    victor = user("victor")  # a witness through a group's grants on hidden tools (the shared vault's only)
    auditors = Group.objects.create(name="oracle-auditors")
    victor.groups.add(auditors, everyone)
    for tool in hidden_list[30:60:3]:
        give(auditors, tool)
    people.append(Person("victor", _token(victor), witness=True))
    walter = user("walter")  # an outsider: no grants at all
    people.append(Person("walter", _token(walter)))
    xavier = user("xavier")  # broad grants in both tenants, a token in tenant red through an agent not narrowed
    red.members.add(xavier), blue.members.add(xavier)
    for slug in ("mail", "calendar", "crm", "billing", "red-lab", "blue-shop", "weather", "storage"):
        give(xavier, servers[slug])
    bot = agent_of(xavier, "xavier-bot", tenant=red, all_user_tools=True)
    people.append(Person("xavier", _token(xavier, agent=bot)))
    assert len(people) == 20
    return people


def _withdraw(servers: dict[str, Server]) -> None:
    """Tools out of service in every way the rule knows, and payroll's pay tools behind an entitlement."""
    disabled = _tool("issues", "create_bug_report")
    disabled.enabled = False
    disabled.save()
    removed = _tool("issues", "delete_bug_report")
    removed.removed_at = timezone.now()
    removed.save()
    held = _tool("chat", "search_chat_channel").policy
    held.held, held.hold_reason = True, "oracle: held for review"
    held.save()
    servers["weather"].status = ServerStatus.DISABLED
    servers["weather"].save()
    pii = Entitlement.objects.get(slug="payroll-pii")
    for tool in Tool.objects.filter(server__slug="payroll", name__endswith="payslip"):
        tool.policy.required_entitlements.add(pii)


@dataclass(frozen=True)
class World:
    people: list[Person]
    hidden: dict[str, int]  # request -> hidden tool pk


@pytest.fixture(scope="module")
def world(django_db_setup, django_db_blocker, tmp_path_factory, encoder) -> Iterator[World]:
    """The catalog, the hidden tools, the people and the index, built and committed once for the module (as
    ``indexed_catalog``); every test runs in its own rolled-back transaction; emptied at the end."""
    with django_db_blocker.unblock():
        superuser = get_user_model().objects.create_user(username="oracle-admin", is_staff=True, is_superuser=True)
        servers, hidden = _catalog(tmp_path_factory.mktemp("oracle"))
        people = _people(superuser, servers, hidden)
        _withdraw(servers)
        index_rebuild()  # autocommit: published on its own commit
        yield World(people=people, hidden={request: tool.pk for request, tool in hidden.items()})
        call_command("flush", verbosity=0, interactive=False)
    cache.clear()
    backends_reset()


@pytest.fixture(autouse=True)
def every_request_vector_kept(settings):
    """Room in the request-vector cache for every person's 200 requests (kept per person, ``vector_cache_scope``)."""
    settings.SCOUT_SEARCH_QUERY_CACHE_SIZE = 8192


def principal_of(person: Person) -> Principal:
    """As the gateway verifies a bearer token, or as the admin builds a session's principal."""
    if person.token:
        principal = api_token_verify(person.token)
        assert principal is not None, person.username
        return principal
    return principal_for_user(get_user_model().objects.get(username=person.username))


def catalog_rows() -> list[Tool]:
    """Every tool with what the rule reads of it, in one pass (the oracle judges each person over these)."""
    return list(
        Tool.objects.select_related("server__tenancy", "policy").prefetch_related("policy__required_entitlements")
    )


def _tenant_of(tool: Tool) -> int | None:
    try:
        return tool.server.tenancy.tenant_id
    except ServerTenant.DoesNotExist:
        return None


def oracle(person: Person, rows: list[Tool]) -> frozenset[int]:
    """What ``person`` may discover, computed without Scout's visibility selector: the tools and servers guardian's
    ``get_objects_for_user`` says the person holds ``discover`` on (their own grants and their groups'), then the
    rest of DESIGN's rule from the rows: servable (enabled, not removed, active server, a policy not held that
    accepted the definition), shared or in a tenant the search acts in (a token's tenant; a session: the person's
    tenants), every entitlement the tool needs held, each narrowed agent in the token's chain granting it, the
    token's scopes allowing it. Superusers get nothing implicitly."""
    user = get_user_model().objects.get(username=person.username)
    token = ApiToken.objects.filter(user=user).select_related("agent").first() if person.token else None
    scopes = set(token.scopes) if token is not None else {"discover", "execute"}
    if not user.is_active or "discover" not in scopes:
        return frozenset()
    only_granted = {"with_superuser": False, "accept_global_perms": False}
    servers = set(
        get_objects_for_user(user, "catalog.discover_server", Server, **only_granted).values_list("pk", flat=True)
    )
    tools = set(get_objects_for_user(user, "catalog.discover_tool", Tool, **only_granted).values_list("pk", flat=True))
    tenants = {token.tenant_id} - {None} if token is not None else set(user.tenants.values_list("pk", flat=True))
    entitled = set(Entitlement.objects.filter(users=user).values_list("pk", flat=True))
    entitled |= set(Entitlement.objects.filter(groups__user=user).values_list("pk", flat=True))
    agents: list[set[tuple[int | None, int | None]]] = []
    agent = token.agent if token is not None else None
    while agent is not None:  # the token's agent and the agents above it: each narrowed one must grant the tool
        if not agent.all_user_tools:
            agents.append(
                set(AgentGrant.objects.filter(agent=agent, action="discover").values_list("server_id", "tool_id"))
            )
        agent = agent.parent
    limited = {scope.removeprefix("server:") for scope in scopes if scope.startswith("server:")}
    allowed = set()
    for tool in rows:
        policy = getattr(tool, "policy", None)
        if (
            (tool.server_id in servers or tool.pk in tools)
            and tool.enabled
            and tool.removed_at is None
            and tool.server.status == ServerStatus.ACTIVE
            and policy is not None
            and not policy.held
            and policy.accepted_hash == tool.definition_hash
            and _tenant_of(tool) in {None, *tenants}
            and {entitlement.pk for entitlement in policy.required_entitlements.all()} <= entitled
            and all((tool.server_id, None) in grants or (None, tool.pk) in grants for grants in agents)
            and (not limited or tool.server.slug in limited)
        ):
            allowed.add(tool.pk)
    return frozenset(allowed)


def vectors_kept_for(principal: Principal, encoder: Encoder, requests: list[str]) -> None:
    """The requests' vectors put in the request-vector cache under ``principal``'s scope, where their searches look
    first (``vector_cache_scope``: one person's vectors serve that person only). Encoded once for everyone, in one
    model call (``encode_queries``, cached in a scope of this module's): 200 vectors, not 4,000 one at a time."""
    vectors = encoder.encode_queries(requests, "oracle")
    for request, vector in zip(requests, vectors, strict=True):
        query_cache().put((encoder.key, vector_cache_scope(principal.user), request), vector)


def snapshot(result) -> tuple:
    """Everything a search answers a person: ids, order, scores, ranks, reasons, confidence, count."""
    matches = [
        (m.tool_id, m.score, m.fused_rank, m.bm25_rank, m.dense_rank, repr(m.why_matched)) for m in result.matches
    ]
    return (result.confidence, result.nothing_visible, len(matches), matches)


def test_twenty_people_times_two_hundred_requests_find_only_what_guardian_allows(world, encoder):
    """Z1: 4,000 searches through ``search_for_principal``; 0 matches outside the oracle's set, and a hidden tool
    a witness may see is that witness's best match for the request it was built for."""
    rows = catalog_rows()
    violations: list[str] = []
    returned = hidden_won = 0
    for person in world.people:
        principal = principal_of(person)
        allowed = oracle(person, rows)
        vectors_kept_for(principal, encoder, REQUESTS)
        for request in REQUESTS:
            result = search_for_principal(principal=principal, query=request, top_k=TOP_K)
            returned += len(result.matches)
            leaked = [m.tool_id for m in result.matches if m.tool_pk not in allowed]
            if leaked:
                violations.append(f"{person.username} searching {request!r} was shown {', '.join(leaked)}")
            elif result.nothing_visible != (not allowed):
                violations.append(f"{person.username} searching {request!r} was told nothing_visible={not allowed}")
            if world.hidden.get(request) in allowed:
                assert result.matches[0].tool_pk == world.hidden[request], (person.username, request)
                hidden_won += 1
    assert not violations, f"{len(violations)} of 4000 searches went beyond what guardian allows:\n" + "\n".join(
        violations[:25]
    )
    assert hidden_won >= 20 and returned >= 10_000  # the witnesses found theirs; the others were answered


def test_removing_the_hidden_tools_changes_nothing_for_people_who_may_see_none(world, encoder, reindex):
    """Z2: for the 18 people who may see no hidden tool, 10 requests each built a hidden best match for answer the
    same with the hidden tools in the index and removed from it; and each hidden tool does win its request for
    someone who may see it (it would be caught if it leaked)."""
    rows = catalog_rows()
    sample = REQUESTS[::20]
    people = [person for person in world.people if not person.witness]
    principals = {person.username: principal_of(person) for person in people}
    for person in people:
        assert not oracle(person, rows) & set(world.hidden.values()), person.username
        vectors_kept_for(principals[person.username], encoder, sample)

    def answers() -> dict[tuple[str, str], tuple]:
        return {
            (name, request): snapshot(search_for_principal(principal=principal, query=request, top_k=TOP_K))
            for name, principal in principals.items()
            for request in sample
        }

    before = answers()
    for n, request in enumerate(sample):
        person = people[n % len(people)]
        shown = tool_search(query=request, visible=oracle(person, rows) | {world.hidden[request]}, top_k=TOP_K)
        assert shown.matches[0].tool_pk == world.hidden[request], (person.username, request)
    for tool in Tool.objects.filter(pk__in=world.hidden.values()):
        tool.removed_at = timezone.now()
        tool.save()
    reindex(index_update, tool_pks=world.hidden.values())
    after = answers()
    changed = [
        f"{name} searching {request!r}"
        for (name, request), answer in after.items()
        if answer != before[(name, request)]
    ]
    assert not changed, f"removing hidden tools changed {len(changed)} answers:\n" + "\n".join(changed[:25])
