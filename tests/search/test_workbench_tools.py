"""The workbench's "Tools agents did not find": the curator's tools no logged search returned, and those returned
but never called, read from a bounded window of the query log, per tenant."""

from datetime import timedelta

import pytest
from django.contrib.auth.models import Permission
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone
from django.utils.http import urlencode

from governance.principals import principal_for_user
from search.models import QueryLogEntry, SearchOutcome
from search.unfound import tools_unfound
from tests.governance.factories import ServerFactory, ToolFactory, tenant_with
from tests.search.factories import logged_search

pytestmark = [pytest.mark.django_db]
PAGE = "search_workbench_tools"


def test_lists_the_tools_no_search_returned_busiest_server_first_and_those_never_called(client, curator, member):
    busy, quiet = ServerFactory(slug="files"), ServerFactory(slug="weather")
    read, stat, write = (ToolFactory(server=busy, name=name) for name in ("read_file", "stat_file", "write_file"))
    forecast = ToolFactory(server=quiet, name="forecast")
    # Added before forecast, yet listed first: its server's tools were returned most.
    move = ToolFactory(server=busy, name="move_file", first_seen_at=timezone.now() - timedelta(days=90))
    forecast.first_seen_at = timezone.now() - timedelta(days=10)
    forecast.save()
    copy = ToolFactory(server=busy, name="copy_file", first_seen_at=timezone.now() - timedelta(days=30))
    ToolFactory(server=busy, name="delete_file", enabled=False)  # reaches nobody: no curator's gap
    for _ in range(3):
        logged_search(member, read, stat, called=read)
    logged_search(member, write)

    unfound = tools_unfound(user=curator)
    assert [tool.tool_id for tool in unfound.never_returned] == [copy.tool_id, move.tool_id, forecast.tool_id]
    assert [tool.server_returned for tool in unfound.never_returned] == [7, 7, 0]
    never_called = [(tool.tool_id, tool.returned) for tool in unfound.never_called]
    assert never_called == [("files::stat_file", 3), ("files::write_file", 1)]
    assert (unfound.scanned, unfound.curated) == (4, 6)

    client.force_login(curator)
    html = client.get(reverse(PAGE)).content.decode()
    change = f"{reverse('admin:catalog_tool_change', args=[move.pk])}?{urlencode({'next': reverse(PAGE)})}"
    row = html.split('data-tool-id="files::move_file"', 1)[1].split("</tr>", 1)[0]
    assert f'href="{change}#examples-group">Its example requests</a>' in row  # may not add one: read-only there
    curator.user_permissions.add(Permission.objects.get(codename="add_toolexample"))
    row = client.get(reverse(PAGE)).content.decode().split('data-tool-id="files::move_file"', 1)[1]
    assert f'href="{change}#examples-group">Add an example request</a>' in row.split("</tr>", 1)[0]
    assert f'href="{reverse("search_preview_tool", args=[move.pk])}"' in row
    assert f'<a id="unfound-preview" href="{reverse("search_preview")}">search in the preview</a>' in html
    assert "Never returned: 3" in html and "Returned, never called: 2" in html
    assert "find the thing" not in html  # no request's words: only the curator's tools and counts
    assert "files::delete_file" not in html
    assert client.get(change).status_code == 200


def _save_with_an_example(client, url: str, text: str, *, button: str = "_save"):
    data = {"title": "", "purpose": "", "entity_types": "", "operation_verbs": "", "enabled": "on", button: "1"}
    for prefix in ("aliases", "keywords", "examples", "negative_examples", "group_grants", "user_grants"):
        data.update({f"{prefix}-TOTAL_FORMS": "0", f"{prefix}-INITIAL_FORMS": "0"})
    data.update({"examples-TOTAL_FORMS": "1", "examples-0-text": text})
    return client.post(url, data)


def test_saving_a_tool_opened_from_the_page_comes_back_to_it(client, curator, member):
    """The curator adds an example request from the page and Save brings them back to it, not to the tool list;
    "Save and continue editing" keeps the way back."""
    curator.user_permissions.add(Permission.objects.get(codename="add_toolexample"))
    move = ToolFactory(server=ServerFactory(slug="files"), name="move_file")
    client.force_login(curator)
    html = client.get(reverse(PAGE)).content.decode()
    row = html.split('data-tool-id="files::move_file"', 1)[1].split("</tr>", 1)[0]
    link = row.split('class="add-example" href="', 1)[1].split('"', 1)[0].split("#", 1)[0]
    assert link == f"{reverse('admin:catalog_tool_change', args=[move.pk])}?{urlencode({'next': reverse(PAGE)})}"

    kept = _save_with_an_example(client, link, "rename a file", button="_continue")
    assert kept.status_code == 302 and kept["Location"].endswith(f"?{urlencode({'next': reverse(PAGE)})}")
    back = _save_with_an_example(client, kept["Location"], "put the file in another folder")
    assert back.status_code == 302 and back["Location"] == reverse(PAGE)
    assert set(move.examples.values_list("text", flat=True)) == {"rename a file", "put the file in another folder"}


@pytest.mark.parametrize(
    "elsewhere",
    ["https://evil.example/admin/", "//evil.example/admin/", "/\\evil.example/admin/", "/accounts/", "/admin/\nx"],
)
def test_save_goes_back_to_no_other_site_nor_outside_the_admin(client, curator, elsewhere):
    curator.user_permissions.add(Permission.objects.get(codename="add_toolexample"))
    move = ToolFactory(server=ServerFactory(slug="files"), name="move_file")
    client.force_login(curator)
    url = f"{reverse('admin:catalog_tool_change', args=[move.pk])}?{urlencode({'next': elsewhere})}"
    saved = _save_with_an_example(client, url, "rename a file")
    assert saved.status_code == 302 and saved["Location"] == reverse("admin:catalog_tool_changelist")
    assert move.examples.filter(text="rename a file").exists()


def test_a_tool_granted_to_nobody_comes_last_and_says_its_fix_is_a_grant(
    client, curator, member, outsider, superuser, django_user_model
):
    """No agent can find a tool no one may be shown (no grant, or only an inactive person's or an empty group's):
    marked, after the tools an example request can help, in the page's same queries."""
    from django.contrib.auth.models import Group

    from governance.services.permissions import permission_grant

    files, mail = ServerFactory(slug="files"), ServerFactory(slug="mail")
    read, stat, nobodys = (ToolFactory(server=files, name=name) for name in ("read_file", "stat_file", "shred_file"))
    send, by_tool, by_group = (ToolFactory(server=mail, name=name) for name in ("send", "archive", "label"))
    gone = django_user_model.objects.create_user(username="gone", is_active=False)
    empty, team = Group.objects.create(name="empty"), Group.objects.create(name="team")
    team.user_set.add(outsider)
    for holder, target in ((member, read), (member, stat), (gone, nobodys), (empty, nobodys), (member, send)):
        permission_grant(actor=superuser, target=target, action="discover", holder=holder)
    permission_grant(actor=superuser, target=by_tool, action="discover", holder=outsider)
    permission_grant(actor=superuser, target=by_group, action="discover", holder=team)
    for _ in range(3):
        logged_search(member, read, stat, called=read)
    logged_search(member, send, called=send)

    unfound = tools_unfound(user=curator)
    listed = [(tool.tool_id, tool.granted) for tool in unfound.never_returned]
    assert listed == [("mail::label", True), ("mail::archive", True), ("files::shred_file", False)]  # newest first
    client.force_login(curator)
    html = client.get(reverse(PAGE)).content.decode()
    rows = {tool: html.split(f'data-tool-id="{tool}"', 1)[1].split("</tr>", 1)[0] for tool, _ in listed}
    assert "Granted to nobody" in rows["files::shred_file"] and "it needs a grant" in rows["files::shred_file"]
    assert "Granted to nobody" not in rows["mail::archive"] + rows["mail::label"]

    # A server grant to a group with an active member reaches shred_file too: no longer marked, back in its place.
    permission_grant(actor=superuser, target=files, action="discover", holder=team)
    listed = [(tool.tool_id, tool.granted) for tool in tools_unfound(user=curator).never_returned]
    assert listed == [("files::shred_file", True), ("mail::label", True), ("mail::archive", True)]


def test_the_workbench_leads_to_the_tools_page(client, curator):
    client.force_login(curator)
    html = client.get(reverse("search_workbench")).content.decode()
    assert f'<a href="{reverse(PAGE)}" id="show-unfound-tools">tools agents did not find</a>' in html


def test_reads_the_newest_searches_only_and_says_how_many(client, curator, member, monkeypatch):
    """At a year's volume the page reads the newest ``MAX_ENTRIES`` searches, as the workbench does: a tool
    returned only by an older search counts as never returned in that window, and the page says which window."""
    monkeypatch.setattr("search.unfound.MAX_ENTRIES", 3)
    old, new = ToolFactory(name="old_tool"), ToolFactory(name="new_tool")
    logged_search(member, old)
    QueryLogEntry.objects.update(created_at=timezone.now() - timedelta(days=2))
    for _ in range(3):
        logged_search(member, new, called=new)
    unfound = tools_unfound(user=curator)
    assert [tool.tool_id for tool in unfound.never_returned] == [old.tool_id]
    client.force_login(curator)
    html = " ".join(client.get(reverse(PAGE)).content.decode().split())
    assert "Read from the newest 3 searches that returned a tool" in html
    assert "at most the newest 3 are read" in html


def _fill(member, tools, searches: int) -> None:
    """``searches`` logged searches by ``member``, each returning two of ``tools``, every third followed by a call."""
    principal = principal_for_user(member)
    now = timezone.now()
    QueryLogEntry.objects.bulk_create(
        QueryLogEntry(
            created_at=now - timedelta(minutes=n),
            user=member,
            principal_key=f"user:{member.pk}",
            tenant_id=principal.tenant_id,
            log_mode="full",
            query=f"please find the thing {n}",
            results=[{"tool_id": tools[n % len(tools)].tool_id, "score": 0.5}, {"tool_id": "gone::tool", "score": 0.1}],
            confidence="high",
        )
        for n in range(searches)
    )
    entries = list(QueryLogEntry.objects.order_by("id")[::3])
    SearchOutcome.objects.bulk_create(
        SearchOutcome(entry=entry, tool=tools[0], outcome="success") for entry in entries
    )  # fmt: skip


def _page_queries(client) -> int:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(reverse(PAGE))
    assert response.status_code == 200
    return len(queries)


def test_the_page_costs_the_same_queries_at_any_volume(client, curator, member, monkeypatch):
    """Fixed query count: one read of the bounded window, one of its calls, one of the tools, one of the listed
    tools' names (plus the admin's own), whether 6 tools and 10 searches or 60 tools and 400."""
    monkeypatch.setattr("search.unfound.MAX_ENTRIES", 200)
    monkeypatch.setattr("search.unfound.MAX_TOOLS", 20)
    server = ServerFactory(slug="files")
    tools = [ToolFactory(server=server, name=f"tool_{n:02d}") for n in range(6)]
    _fill(member, tools[:3], 10)
    client.force_login(curator)
    client.get(reverse(PAGE))  # warm caches, as a second visit finds them
    small = _page_queries(client)

    tools += [ToolFactory(server=ServerFactory(slug=f"srv-{n}"), name=f"more_{n:02d}") for n in range(54)]
    _fill(member, tools[:30], 400)
    client.get(reverse(PAGE))
    assert _page_queries(client) == small
    unfound = tools_unfound(user=curator)
    assert unfound.scanned == 200  # the bound, not the 410 logged
    assert len(unfound.never_returned) == 20 and unfound.never_returned_total > 20
    html = client.get(reverse(PAGE)).content.decode()
    assert f"The first 20 of {unfound.never_returned_total} are listed." in html


def test_a_tenant_curator_sees_only_their_tools_counted_over_the_searches_they_may_read(
    client, curator, member, outsider
):
    """Tenant alpha's curator: alpha's tools only (never bravo's, whose existence is bravo's; nor the shared ones,
    which a superuser curates), counted over shared and alpha searches only."""
    from governance.models import ServerTenant

    alpha, bravo = tenant_with("alpha", curator, member), tenant_with("bravo", outsider)
    ours = ToolFactory(server=ServerFactory(slug="alpha-mail"), name="send")
    ServerTenant.objects.create(server=ours.server, tenant=alpha)
    quiet = ToolFactory(server=ours.server, name="archive")
    theirs = ToolFactory(server=ServerFactory(slug="bravo-mail"), name="send")
    ServerTenant.objects.create(server=theirs.server, tenant=bravo)
    shared = ToolFactory(server=ServerFactory(slug="shared-time"), name="now")
    logged_search(outsider, theirs, query="bravo's secret words")
    # A bravo search that returned alpha's archive tool (say, before the server moved): not alpha's to read.
    QueryLogEntry.objects.create(
        tenant=bravo, principal_key="x", log_mode="full", query="bravo words", results=[{"tool_id": quiet.tool_id}]
    )
    logged_search(member, ours, query="alpha words")

    unfound = tools_unfound(user=curator)
    assert [tool.tool_id for tool in unfound.never_returned] == [quiet.tool_id]
    assert [tool.server_returned for tool in unfound.never_returned] == [1]  # alpha's one search, not bravo's
    assert [tool.tool_id for tool in unfound.never_called] == [ours.tool_id]
    assert (unfound.scanned, unfound.curated) == (1, 2)
    client.force_login(curator)
    html = client.get(reverse(PAGE)).content.decode()
    for hidden in (theirs.tool_id, "bravo-mail", shared.tool_id, "bravo's secret words", "alpha words"):
        assert hidden not in html
    assert quiet.tool_id in html and ours.tool_id in html


@pytest.mark.parametrize("perms", [(), (("catalog", "view_tool"), ("catalog", "change_tool"))])
def test_needs_both_curation_and_query_log_permissions(client, django_user_model, perms):
    user = django_user_model.objects.create_user(username="staff", is_staff=True)
    for app, codename in perms:
        user.user_permissions.add(Permission.objects.get(codename=codename, content_type__app_label=app))
    ToolFactory(name="hidden_tool")
    client.force_login(user)
    response = client.get(reverse(PAGE))
    assert response.status_code == 403 and b"hidden_tool" not in response.content


def test_a_curator_who_curates_no_tool_is_told_so_not_that_every_tool_was_found(client, curator, member):
    """Once the install has tenants, a curator in none curates no tool (shared ones are a superuser's): the page
    says so, not "every tool you curate was returned"."""
    tenant_with("alpha")
    shared = ToolFactory(server=ServerFactory(slug="shared-time"), name="now")
    logged_search(member, shared)
    client.force_login(curator)
    page = client.get(reverse(PAGE))
    assert page.context["unfound"].curated == 0
    html = page.content.decode()
    assert "You curate no tool that some client may get" in html and shared.tool_id not in html
    assert "Every tool you curate was returned" not in html


def test_fewer_searches_than_tools_read_as_early_signs_not_a_verdict(client, curator, member):
    server = ServerFactory(slug="files")
    tools = [ToolFactory(server=server, name=f"tool_{n}") for n in range(3)]
    logged_search(member, tools[0])
    client.force_login(curator)
    html = client.get(reverse(PAGE)).content.decode()
    assert 'id="unfound-few"' in html and "Only 1 search so far, fewer than the\n3 tools you curate" in html

    for _ in range(2):
        logged_search(member, tools[1])
    assert 'id="unfound-few"' not in client.get(reverse(PAGE)).content.decode()  # 3 searches, 3 tools


def test_a_tool_returned_for_unrelated_requests_is_listed_for_review(client, curator, member):
    """Search capture: a tool returned beside tools of many servers, in a large share of the searches, is listed
    with a link to its page; a tool returned as often beside its own kind is not."""
    from search.unfound import WIDE_MIN_SEARCHES, WIDE_SERVERS

    wide = ToolFactory(server=ServerFactory(slug="evil"), name="assistant")
    files = ToolFactory(server=ServerFactory(slug="files"), name="read_file")
    sibling = ToolFactory(server=files.server, name="write_file")
    others = [ToolFactory(server=ServerFactory(slug=f"topic{i}"), name="tool") for i in range(WIDE_SERVERS)]
    for i in range(WIDE_MIN_SEARCHES):
        logged_search(member, others[i % WIDE_SERVERS], wide)
        logged_search(member, files, sibling)

    unfound = tools_unfound(user=curator)
    assert [(tool.tool_id, tool.returned, tool.alongside) for tool in unfound.wide] == [
        ("evil::assistant", WIDE_MIN_SEARCHES, WIDE_SERVERS)
    ]
    client.force_login(curator)
    html = client.get(reverse(PAGE)).content.decode()
    row = html.split('id="wide"', 1)[1].split("</table>", 1)[0]
    change = f"{reverse('admin:catalog_tool_change', args=[wide.pk])}?{urlencode({'next': reverse(PAGE)})}"
    assert f'<a class="review-wide" href="{change}">Review its text</a>' in row
    assert "files::read_file" not in row and "files::write_file" not in row
    assert "Returned for unrelated requests: 1" in html and f"beside the tools of\n{WIDE_SERVERS} or more" in html
