"""Z12, every admin page at once: tenant A's staff (operator, curator and approver in one person) never reads or
changes a row of tenant B, whichever admin address they try. Each row that names tenant B's marker (its server,
tool, sync run, phrases, learned request, query log, dismissal, pin, idempotency record, agent, token, approval,
audit events, grants, person) is asked about on every object page of its model (change, history, delete, the custom
ones) and through "view on site" (``admin/r/<content type>/<id>/``); every changelist is searched for the marker
(``?q=``, also as a related-object popup with ``_to_field``) and must answer as for a word nobody wrote; every
autocomplete is asked for it; every action and delete is posted with tenant B's rows selected and changes nothing,
where a superuser's same posts change them (so the posts reach the actions)."""

import re
from datetime import timedelta

import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth.models import Group
from django.contrib.contenttypes.models import ContentType
from django.core import serializers
from django.test import RequestFactory
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils import timezone

from catalog.models import SyncRun, ToolAlias, ToolExample
from governance.models import ServerTenant, ToolReview
from governance.roles import APPROVERS, CURATORS, OPERATORS
from governance.services.approvals import approval_request_create
from governance.services.audit import audit_record
from governance.services.tokens import api_token_create, api_token_verify
from mcpgateway.models import IdempotencyRecord, PinnedTool
from search.models import DismissedRequest, LearnedConfirmation, LearnedRequest, QueryLogEntry, SearchOutcome
from tests.governance.factories import ServerFactory, ToolFactory, agent_of, tenant_with

pytestmark = pytest.mark.django_db

MARK = "zqbravo"  # in every tenant B row, and in nothing else
ABSENT = "zqnoone"  # the same length: a search for it finds nothing anywhere


def _routes():
    def walk(patterns, prefix=""):
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                yield prefix + str(pattern.pattern)

    return sorted(set(walk(get_resolver().url_patterns)))


def _address(route: str, value: object) -> str:
    route = re.sub(r"<[^>]+>|\(\?P<[^>]+>[^)]*\)", str(value), route)
    return "/" + route.replace("^", "").replace("$", "").replace("\\Z", "").replace("\\", "")


@pytest.fixture
def world(django_user_model, grant, superuser):
    ann = django_user_model.objects.create_user(username="ann-a", is_staff=True)
    for role in (OPERATORS, CURATORS, APPROVERS):
        ann.groups.add(Group.objects.get(name=role))
    bob = django_user_model.objects.create_user(username=f"{MARK}-bob")
    tenant_with("tenant-a", ann)
    tenant_b = tenant_with(f"{MARK}-tenant", bob)
    shared = ServerFactory(slug="shared-srv")
    shared_tool = ToolFactory(server=shared, name="shared_tool")
    server = ServerFactory(slug=f"{MARK}-srv", name=f"{MARK} server", last_error=f"{MARK} failed")
    ServerTenant.objects.create(server=server, tenant=tenant_b)
    tool = ToolFactory(server=server, name=f"{MARK}_tool", description=f"{MARK} tool")
    grant(bob, server, "discover", "execute")
    grant(bob, shared, "discover", "execute")
    ToolReview.objects.create(tool=tool, definition_hash="f" * 64, kind="suspicious")
    SyncRun.objects.create(server=server, source=MARK, error=f"{MARK} failed", started_at=timezone.now())
    ToolAlias.objects.create(tool=tool, text=f"{MARK} alias")
    ToolExample.objects.create(tool=tool, text=f"{MARK} example")
    learned = LearnedRequest.objects.create(tool=tool, text=f"{MARK} learned words", key="k1", principal_count=1)
    LearnedConfirmation.objects.create(learned=learned, principal_key=f"u{bob.pk}")
    for asked, found in ((f"{MARK} own words", tool), (f"{MARK} shared words", shared_tool)):
        entry = QueryLogEntry.objects.create(
            user=bob, tenant=tenant_b, principal_key="k", query=asked, confidence="high", log_mode="full",
            results=[{"tool_id": found.tool_id, "score": 1.0}],
        )  # fmt: skip
        SearchOutcome.objects.create(entry=entry, tool=found, outcome="success")
    DismissedRequest.objects.create(tenant=tenant_b, key="k", text=f"{MARK} dismissed", dismissed_by=bob)
    PinnedTool.objects.create(tool=tool, note=f"{MARK} pin")
    IdempotencyRecord.objects.create(
        principal_key=MARK, key=MARK, tool_ref=tool.tool_id, arguments_digest="a",
        created_at=timezone.now(), expires_at=timezone.now() + timedelta(days=1),
    )  # fmt: skip
    agent = agent_of(bob, f"{MARK}-agent", tenant=tenant_b)
    _, raw = api_token_create(
        user=bob, name=f"{MARK} token", agent=agent, tenant=tenant_b, scopes=["discover", "execute"],
        expires_at=timezone.now() + timedelta(days=1),
    )  # fmt: skip
    principal = api_token_verify(raw)
    audit_record(event_type="execution", principal=principal, tool=tool, outcome="success", payload={"q": MARK})
    approval_request_create(principal=principal, tool=tool, arguments={"x": MARK})
    rows = {}  # model -> pks of its rows naming the marker
    for model in apps.get_models():
        pks = [obj.pk for obj in model.objects.all() if MARK in repr(vars(obj)) or MARK in str(obj)]
        if pks and admin.site.is_registered(model):
            rows[model] = pks
    return {"ann": ann, "superuser": superuser, "rows": rows, "tool": tool, "server": server}


def test_the_world_has_tenant_b_rows_of_the_models_it_means_to_ask_about(world):
    names = {model._meta.label_lower for model in world["rows"]}
    assert {
        "catalog.server", "catalog.tool", "catalog.syncrun", "search.learnedrequest",
        "search.querylogentry", "governance.apitoken", "governance.agent", "governance.approvalrequest",
        "governance.auditevent", "governance.serveruserobjectpermission", "auth.user", "mcpgateway.pinnedtool",
    } <= names  # fmt: skip


def test_no_object_page_or_view_on_site_shows_tenant_bs_rows(client, world):
    """Each object page answers about a tenant B row as about a row that does not exist (a refusal the person
    meets for every row alike is such an answer); a row the person's own list shows (a shared audit event about
    tenant B's person) is answered, without the marker."""
    client.force_login(world["ann"])
    request = RequestFactory().get("/admin/")
    request.user = world["ann"]
    shown, missing = [], {}  # route -> its answer for a row that does not exist
    for route in _routes():
        model_route = re.match(r"admin/(\w+)/(\w+)/", route)
        if not model_route or ("<" not in route and "(?P" not in route):
            continue
        try:
            model = apps.get_model(*model_route.groups())
        except LookupError:
            continue
        for pk in world["rows"].get(model, []):
            answer = client.get(_address(route, pk))
            listed = admin.site._registry[model].get_queryset(request).filter(pk=pk).exists()
            if route not in missing:
                missing[route] = client.get(_address(route, 999999)).status_code
            if MARK in answer.content.decode() or (not listed and answer.status_code != missing[route]):
                shown.append((_address(route, pk), answer.status_code, missing[route]))
    for model, pks in world["rows"].items():
        content_type = ContentType.objects.get_for_model(model)
        for pk in pks:
            response = client.get(f"/admin/r/{content_type.pk}/{pk}/")
            if response.status_code != 404:
                shown.append((f"admin/r/ {model._meta.label_lower} {pk}", response.status_code))
    assert shown == []


def test_a_search_for_tenant_bs_words_in_any_list_or_popup_answers_as_for_words_nobody_wrote(client, world):
    client.force_login(world["ann"])
    token = re.compile(r'name="csrfmiddlewaretoken" value="[^"]*"')
    differing = []
    for model, model_admin in admin.site._registry.items():
        changelist = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        for extra in ({}, {"_popup": "1", "_to_field": model._meta.pk.attname}):
            asked = client.get(changelist, {"q": MARK, **extra})
            control = client.get(changelist, {"q": ABSENT, **extra})
            answer = token.sub("", asked.content.decode()).replace(MARK, ABSENT)
            if asked.status_code != control.status_code or answer != token.sub("", control.content.decode()):
                differing.append((changelist, extra))
        for field_name in model_admin.autocomplete_fields:
            found = client.get(
                "/admin/autocomplete/",
                {"app_label": model._meta.app_label, "model_name": model._meta.model_name,
                 "field_name": field_name, "term": MARK},
            )  # fmt: skip
            if MARK in found.content.decode():
                differing.append(("autocomplete", model._meta.label_lower, field_name))
    assert differing == []


def _snapshot(rows) -> dict[str, str]:
    return {
        model._meta.label_lower: serializers.serialize("json", model.objects.filter(pk__in=pks))
        for model, pks in rows.items()
    }


def _post_every_action_and_delete(client, person, rows) -> list[tuple[str, str, int]]:
    """Each action of each list and each delete page, posted for one tenant B row at a time; the ones that changed
    a tenant B row."""
    client.force_login(person)
    changed, before = [], _snapshot(rows)
    for model, pks in rows.items():
        changelist = f"/admin/{model._meta.app_label}/{model._meta.model_name}/"
        request = RequestFactory().get(changelist)
        request.user = person
        for action in admin.site._registry[model].get_actions(request):
            for pk in pks:
                client.post(changelist, {"action": action, "_selected_action": [pk], "index": 0, "post": "yes"})
                if (now := _snapshot(rows)) != before:
                    changed.append((model._meta.label_lower, action, pk))
                    before = now
        for pk in pks:
            client.post(f"{changelist}{pk}/delete/", {"post": "yes"})
            if (now := _snapshot(rows)) != before:
                changed.append((model._meta.label_lower, "delete", pk))
                before = now
    return changed


def test_no_action_or_delete_changes_tenant_bs_rows(client, world):
    assert _post_every_action_and_delete(client, world["ann"], world["rows"]) == []


def test_the_same_posts_by_a_superuser_do_change_them(client, world):
    """The control: the posts above reach the actions and delete pages."""
    changed = {
        (model, action) for model, action, _ in _post_every_action_and_delete(client, world["superuser"], world["rows"])
    }
    assert {("catalog.server", "archive"), ("search.learnedrequest", "promote")} <= changed
    assert "mcpgateway.pinnedtool" in {model for model, _ in changed}
