"""Tool and server pages are named for the tool or server and for what their reader does there, not Django's
"Change tool" / "Select tool to change"; the phrase sections add "another alias", not "another Tool alias"."""

import re
from html import escape, unescape

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from governance.choices import AuditEventType
from governance.models import ApprovalRequest, AuditEvent
from governance.roles import CURATORS, OPERATORS
from governance.services.permissions import permission_grant
from tests.governance.factories import GroupFactory, ServerFactory, ToolFactory

pytestmark = pytest.mark.django_db


def _staff(django_user_model, username: str, role: str):
    user = django_user_model.objects.create_user(username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return user


def test_a_curator_curates_the_tool_named_in_the_title(client, django_user_model):
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="send_email")
    client.force_login(_staff(django_user_model, "cur", CURATORS))
    page = client.get(reverse("admin:catalog_tool_change", args=[tool.pk]))
    html = page.content.decode()
    assert page.context["title"] == "Curate mail::send_email"
    assert "<title>Curate mail::send_email | Scout admin</title>" in html
    assert "Change tool" not in html
    for phrase in ("alias", "keyword", "example request", "negative query"):  # the add links, as written
        assert f"Add another {phrase}&quot;" in html and f"Add another {phrase.capitalize()}" not in html, phrase
    assert "Tool alias" not in html and "Tool keyword" not in html
    listing = client.get(reverse("admin:catalog_tool_changelist"))
    assert listing.context["title"].startswith("Tools — open one to curate")


def test_an_operator_reads_the_tool_page_under_its_name(client, django_user_model):
    """An operator grants access on a tool page but curates nothing: the title does not say "Curate"."""
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="send_email")
    client.force_login(_staff(django_user_model, "op", OPERATORS))
    page = client.get(reverse("admin:catalog_tool_change", args=[tool.pk]))
    assert page.context["title"] == "Tool mail::send_email"
    assert "Change tool" not in page.content.decode()
    assert "Tools you may curate" not in client.get(reverse("admin:catalog_tool_changelist")).content.decode()


def test_the_server_page_is_named_for_the_server(client, django_user_model):
    server = ServerFactory(slug="mail")
    client.force_login(_staff(django_user_model, "op", OPERATORS))
    page = client.get(reverse("admin:catalog_server_change", args=[server.pk]))
    assert page.context["title"] == "Server mail"
    assert "Change server" not in page.content.decode()
    listing = client.get(reverse("admin:catalog_server_changelist"))
    assert listing.context["title"].startswith("Servers — ")


@pytest.mark.parametrize(
    ("changelist", "starts"),
    [
        ("admin:catalog_syncrun_changelist", "Sync runs — "),
        ("admin:catalog_toolrevision_changelist", "Tool revisions — "),
        ("admin:governance_toolreview_changelist", "Tool reviews — tools held from clients"),
    ],
)
def test_record_lists_say_what_they_hold(client, superuser, changelist, starts):
    """An empty list under "Select tool review to change" told a curator nothing about what would appear there."""
    client.force_login(superuser)
    page = client.get(reverse(changelist))
    assert page.context["title"].startswith(starts)
    assert "Select " not in page.content.decode().split("<h1>", 1)[1].split("</h1>", 1)[0]


def _seed_every_kind(superuser, member) -> None:
    """At least one row of most registered models, written by the services that write them."""
    from governance.principals import principal_for_user
    from governance.services.approvals import approval_request_create
    from governance.services.permissions import permission_grant
    from search.usage import LoggedResult, query_log_record
    from tests.governance.factories import tenant_token

    server = ServerFactory(slug="mail")
    tool = ToolFactory(server=server, name="send_email", annotations=None)
    for action in ("discover", "execute"):
        permission_grant(actor=superuser, target=server, action=action, holder=member)
    tenant_token(member, "acme")
    principal = principal_for_user(member)
    query_log_record(principal=principal, query="send mail", results=[LoggedResult(tool_id=tool.tool_id, score=0.5)],
                     confidence="high", degraded=False, backend="embedded", latency_ms=3)  # fmt: skip
    approval_request_create(principal=principal, tool=tool, arguments={"to": "a@example.com"})


def _crumbs(html: str) -> list[str]:
    """The breadcrumbs' words, as read."""
    trail = html.split('<div class="breadcrumbs">', 1)[1].split("</div>", 1)[0]
    return [unescape(re.sub(r"<[^>]+>", "", crumb)).strip() for crumb in re.split("&rsaquo;|›", trail)]


def _heading(html: str) -> tuple[str, str]:
    title = unescape(html.split("<title>", 1)[1].split("</title>", 1)[0].strip())  # as read: quotes, not &quot;
    h1 = unescape(html.split("<h1>", 1)[1].split("</h1>", 1)[0].strip())
    assert html.count("<h1") == 1, "one heading per page"
    return title, h1


def test_admin_titles_everywhere(client, superuser, member):
    """Every ModelAdmin's list and object pages are named by TitledAdminMixin: the list for what it holds, an
    object's page for the object (never Django's "Select … to change" or "Change …"), the <title> as the <h1>."""
    from django.contrib import admin

    from catalog.admin.titles import TitledAdminMixin

    _seed_every_kind(superuser, member)
    client.force_login(superuser)
    checked = deleted = 0
    # The navigation's job groups, by the models they list (each model in one group).
    request = client.get(reverse("admin:index")).wsgi_request  # the superuser's: each list's rows are read as theirs
    navigation = admin.site.get_app_list(request)
    groups = {entry["object_name"]: group for group in navigation for entry in group["models"]}
    for model, model_admin in admin.site._registry.items():
        assert isinstance(model_admin, TitledAdminMixin), f"{model._meta.label}: pages without a title of their own"
        info = model._meta.app_label, model._meta.model_name
        listing = client.get(reverse("admin:{}_{}_changelist".format(*info))).content.decode()
        title, h1 = _heading(listing)
        assert not h1.startswith("Select "), model._meta.label
        assert title == f"{h1} | Scout admin"
        # After Home, the job group the navigation lists the model under (its name and link), not the Django app.
        group = groups[model.__name__]
        assert _crumbs(listing)[:2] == ["Home", group["name"]], model._meta.label
        assert f'&rsaquo; <a href="{group["app_url"]}">{escape(group["name"])}</a>' in listing, model._meta.label
        obj = model_admin.get_queryset(request).first()
        if obj is None:
            continue
        page = client.get(reverse("admin:{}_{}_change".format(*info), args=[obj.pk]), follow=True)
        title, h1 = _heading(page.content.decode())
        assert not h1.startswith(("Change ", "View ")), f"{model._meta.label}: {h1}"
        assert title == f"{h1} | Scout admin", model._meta.label
        # The last breadcrumb names the object as the heading does, not by its raw str() ("sync faulty … success");
        # the decide page's, the call without the arguments the heading goes on with (adminux24).
        crumb = _crumbs(page.content.decode())[-1]
        if model is ApprovalRequest:
            assert unescape(h1).startswith(f"{crumb}: "), (crumb, h1)
        else:
            assert crumb == unescape(h1), model._meta.label
        if any(used.name == "admin/change_form.html" for used in page.templates):  # not a page of its own (decide)
            assert _crumbs(page.content.decode())[1] == group["name"], model._meta.label
        history = client.get(reverse("admin:{}_{}_history".format(*info), args=[obj.pk])).content.decode()
        named = unescape(_heading(history)[1].removeprefix("History: "))
        assert _crumbs(history)[-2:] == [named, "History"], model._meta.label
        assert _crumbs(history)[1] == group["name"], model._meta.label
        if model_admin.has_delete_permission(page.wsgi_request, obj):
            deletion = client.get(reverse("admin:{}_{}_delete".format(*info), args=[obj.pk])).content.decode()
            assert _crumbs(deletion)[-2:] == [unescape(h1), "Delete"], model._meta.label
            assert _crumbs(deletion)[1] == group["name"], model._meta.label
            deleted += 1
        checked += 1
    assert checked >= 14 and deleted >= 1  # the seed reached most models' pages


def test_custom_pages_have_one_heading_in_their_title(client, superuser, member):
    """The pages that are not a model's (dashboard, workbench, preview, decide, connection test) name themselves
    the same way: one <h1>, and the <title> says it with the site's name."""

    _seed_every_kind(superuser, member)
    client.force_login(superuser)
    pending = ApprovalRequest.objects.get()
    pages = {
        reverse("dashboard"): "Operations dashboard",
        reverse("dashboard_searches"): "Searches by backend and server",
        reverse("search_workbench"): "Search workbench",
        reverse("search_preview"): "Search preview",
        reverse("admin:governance_approvalrequest_decide", args=[pending.pk]): (
            'Decide mail::send_email for member: to: "a@example.com"'  # the call first, not the apr_ id
        ),
    }
    for url, expected in pages.items():
        title, h1 = _heading(client.get(url).content.decode())
        assert h1 == expected and title == f"{expected} | Scout admin", url
    server = ServerFactory(slug="clock")
    tested = client.post(
        f"{reverse('admin:catalog_server_test_connection')}?server={server.pk}", {"transport": "imported"}
    )
    assert _heading(tested.content.decode()) == ("Test connection: clock | Scout admin", "Test connection: clock")


def _loads_of(obj, queries: CaptureQueriesContext) -> int:
    """How many of ``queries`` read ``obj``'s own row (its table's row by its primary key)."""
    table = obj._meta.db_table
    by_pk = re.compile(rf'"{table}"\."id" = {obj.pk}\b')
    return sum(
        1 for q in queries.captured_queries if q["sql"].startswith(f'SELECT "{table}".') and by_pk.search(q["sql"])
    )


@pytest.mark.parametrize("view", ["change", "history", "delete"])
def test_a_titled_page_loads_its_object_once(view, client, superuser):
    """The title is made from the object the page loaded anyway: no second read of its row."""
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="send")
    permission_grant(actor=superuser, target=tool, action="execute", holder=GroupFactory(name="ops"))
    event = AuditEvent.objects.get(event_type=AuditEventType.GRANT)
    client.force_login(superuser)
    pages = {"change": (tool.server, tool, event, Group.objects.get(name="ops")), "history": (tool, event)}
    for obj in pages.get(view, (Group.objects.get(name="ops"),)):
        url = reverse(f"admin:{obj._meta.app_label}_{obj._meta.model_name}_{view}", args=[obj.pk])
        with CaptureQueriesContext(connection) as queries:
            page = client.get(url)
        assert page.status_code == 200, url
        titled = {"change": page.context["subtitle"] is None, "history": page.context["title"].startswith("History: ")}
        assert titled.get(view, page.context["subtitle"] == "Group ops"), url  # the mixin's titles, not Django's
        assert _loads_of(obj, queries) == 1, url


def test_deleting_several_names_the_navigation_group(client, superuser):
    """The page that confirms a bulk delete names the job group too (Home › Access › Groups …), not "Authentication
    and Authorization", whose index page the navigation never shows."""
    group = GroupFactory(name="ops")
    client.force_login(superuser)
    page = client.post(
        reverse("admin:auth_group_changelist"), {"action": "delete_selected", "_selected_action": [group.pk]}
    ).content.decode()
    assert _crumbs(page) == ["Home", "Access", "Groups", "Delete multiple objects"]
    assert f'&rsaquo; <a href="{reverse("admin:index")}#access">Access</a>' in page


def test_every_group_link_lands_on_its_group(client, superuser, member):
    """The navigation's and the breadcrumbs' group links (``/admin/#servers-sync``) point at an element of the home
    page with that id: the group's own list, not the top of the page."""
    from django.contrib import admin

    _seed_every_kind(superuser, member)
    client.force_login(superuser)
    home = client.get(reverse("admin:index"))
    groups = admin.site.get_app_list(home.wsgi_request)
    assert len(groups) >= 4
    html = home.content.decode()
    for group in groups:
        path, anchor = group["app_url"].split("#")
        assert path == reverse("admin:index")
        assert html.count(f'id="{anchor}"') == 1, group["name"]


def _custom_page(name: str, client, superuser, member) -> tuple[str, str]:
    """(the page's HTML, the link of the list or navigation page it belongs to) for each page that is not a model's
    own, reached as its reader reaches it."""
    from governance.services.tokens import api_token_create
    from tests.governance.factories import in_days

    tool = ToolFactory(server=ServerFactory(slug="clock"), name="now")
    if name == "decide":
        url = reverse("admin:governance_approvalrequest_decide", args=[ApprovalRequest.objects.get().pk])
        return client.get(url).content.decode(), reverse("admin:governance_approvalrequest_changelist")
    servers, tokens = reverse("admin:catalog_server_changelist"), reverse("admin:governance_apitoken_changelist")
    if name == "test connection":
        url = f"{reverse('admin:catalog_server_test_connection')}?server={tool.server.pk}"
        return client.post(url, {"transport": "imported"}).content.decode(), servers
    if name == "openapi preview":
        openapi = ServerFactory(slug="pets", transport="openapi")
        return client.get(reverse("admin:catalog_server_openapi_preview", args=[openapi.pk])).content.decode(), servers
    if name == "token created":
        form = {"user": member.pk, "name": "laptop", "base_scopes": ["discover"]}
        form |= {"expires_at_0": in_days(7).strftime("%Y-%m-%d"), "expires_at_1": "12:00:00"}
        return client.post(reverse("admin:governance_apitoken_add"), form).content.decode(), tokens
    if name == "token revoke":
        token, _ = api_token_create(user=member, name="t", scopes=["discover"], expires_at=in_days(1))
        chosen = {"action": "revoke_selected", "_selected_action": [token.pk]}
        return client.post(tokens, chosen).content.decode(), tokens
    if name == "preview tool":
        return client.get(reverse("search_preview_tool", args=[tool.pk])).content.decode(), reverse("search_preview")
    url = reverse(name)  # the navigation's own pages (EXTRA_PAGES): the page is where it belongs
    return client.get(url).content.decode(), url


@pytest.mark.parametrize(
    "page",
    [
        "dashboard",
        "search_workbench",
        "search_preview",
        "preview tool",
        "decide",
        "test connection",
        "openapi preview",
        "token created",
        "token revoke",
    ],
)
def test_custom_page_breadcrumbs_name_the_navigation_group_of_the_page(page, client, superuser, member):
    """A page that is not a model's own names, after Home, the job group the navigation lists it (or the list it
    belongs to) under, with the group's link, as model pages do: not the bare "Home › Approval requests" nor a group
    written by hand."""
    from django.contrib import admin

    _seed_every_kind(superuser, member)
    client.force_login(superuser)
    html, belongs_to = _custom_page(page, client, superuser, member)
    navigation = admin.site.get_app_list(client.get(reverse("admin:index")).wsgi_request)
    [group] = [group for group in navigation if belongs_to in [entry["admin_url"] for entry in group["models"]]]
    assert _crumbs(html)[:2] == ["Home", group["name"]]
    assert f'&rsaquo; <a href="{group["app_url"]}">{escape(group["name"])}</a>' in html
    [entry] = [entry for entry in group["models"] if entry["admin_url"] == belongs_to]
    if page not in ("dashboard", "search_workbench", "search_preview"):  # then the list or page it belongs to
        assert _crumbs(html)[2] == entry["name"], _crumbs(html)


def test_a_record_only_services_write_has_no_history_button(client, superuser, member):
    """A logged search, an audit event, a sync run, an approval ...: nobody changes them in the admin, so their
    History page could only say "This object doesn't have a change history". Their pages offer no such button; a
    server's page, changed in the admin, keeps it."""
    from django.contrib import admin

    from catalog.admin.readonly import ReadOnlyMixin
    from catalog.choices import SyncStatus
    from catalog.models import SyncRun, Tool
    from search.models import LearnedRequest

    _seed_every_kind(superuser, member)
    server = ServerFactory(slug="clock")
    SyncRun.objects.create(server=server, status=SyncStatus.SUCCESS, started_at=timezone.now())
    LearnedRequest.objects.create(tool=Tool.objects.get(tool_id="mail::send_email"), text="mail it", key="k1")
    client.force_login(superuser)
    read_only = [
        (model, model_admin)
        for model, model_admin in admin.site._registry.items()
        if isinstance(model_admin, ReadOnlyMixin) or model is LearnedRequest
    ]
    checked = []
    for model, model_admin in read_only:
        obj = model_admin.get_queryset(client.get(reverse("admin:index")).wsgi_request).first()
        if obj is None:
            continue
        info = model._meta.app_label, model._meta.model_name
        page = client.get(reverse("admin:{}_{}_change".format(*info), args=[obj.pk]), follow=True)
        assert page.status_code == 200, model._meta.label
        assert "historylink" not in page.content.decode(), f"{model._meta.label}: a History button"
        checked.append(model._meta.model_name)
    assert {"querylogentry", "auditevent", "syncrun", "learnedrequest"} <= set(checked), checked
    html = client.get(reverse("admin:catalog_server_change", args=[server.pk])).content.decode()
    assert f'href="{reverse("admin:catalog_server_history", args=[server.pk])}" class="historylink"' in html
