"""The curator preview in the admin: ranked tools with BM25, dense and fused rank; a tool's example check."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from search.services import index_update

from .factories import ToolFactory, add_examples, add_negatives

pytestmark = [pytest.mark.django_db, pytest.mark.slow]

PREVIEW = "search_preview"


@pytest.fixture
def curator(django_user_model):
    # No password: the tests log in with force_login, and the hash costs ~0.5 s of CPU (tests/conftest.py personas).
    user = django_user_model.objects.create_user(username="curator", is_staff=True)
    user.user_permissions.add(Permission.objects.get(codename="view_tool", content_type__app_label="catalog"))
    return user


def rows_of(response) -> list[str]:
    """tool ids of the result rows, in page order."""
    html = response.content.decode()
    marker = 'class="match" data-tool-id="'
    return [chunk.split('"', 1)[0] for chunk in html.split(marker)[1:]]


def test_staff_with_permission_sees_ranked_results_with_branch_ranks(client, curator, indexed):
    client.force_login(curator)
    response = client.get(reverse(PREVIEW), {"query": "list_directory", "top_k": 5, "scope": "every"})
    assert response.status_code == 200
    assert rows_of(response)[0] == "files::list_directory"
    top = response.context["rows"][0][0]
    assert top.fused_rank == 1 and top.bm25_rank == 1 and top.dense_rank is not None
    lines = response.context["rows"][0][1]
    assert any(line.startswith("name:") and "list_directory" in line for line in lines)
    body = response.content.decode()
    # Each retriever's rank under the score (own columns cut the score off at 800 px).
    assert "<th>Rank</th>" in body and '<small class="retriever-ranks">BM25 rank 1 · dense rank ' in body


def test_non_staff_is_redirected_to_login(client, member, indexed):
    client.force_login(member)
    response = client.get(reverse(PREVIEW), {"query": "list_directory"})
    assert response.status_code == 302
    assert reverse("admin:login") in response["Location"]


def test_staff_without_catalog_view_permission_is_denied(client, owner, indexed):
    client.force_login(owner)
    response = client.get(reverse(PREVIEW), {"query": "list_directory"})
    assert response.status_code == 403


def test_upstream_text_is_escaped(client, curator, indexed, reindex):
    evil = ToolFactory(
        server=indexed["read_file"].server,
        name="render_page",
        description="<script>alert('x')</script> Render an HTML page to an image.",
    )
    reindex(index_update, tool_pks=[evil.pk])
    client.force_login(curator)
    response = client.get(reverse(PREVIEW), {"query": "render html page image", "top_k": 5, "scope": "every"})
    body = response.content.decode()
    assert "<script>alert" not in body
    assert "&lt;script&gt;alert" in body


def test_bad_query_shows_a_message_not_an_error(client, curator, indexed):
    client.force_login(curator)
    response = client.get(reverse(PREVIEW), {"query": "?!?!", "top_k": 5})
    assert response.status_code == 200
    assert response.context["outcome"].error
    assert rows_of(response) == []


def test_preview_as_a_user_ranks_only_what_they_may_see(client, superuser, member, indexed):
    from governance.services.permissions import permission_grant

    permission_grant(actor=superuser, target=indexed["get_forecast"], action="discover", holder=member)
    client.force_login(superuser)
    response = client.get(
        reverse(PREVIEW), {"query": "weather forecast alerts storm", "top_k": 10, "as_user": "member"}
    )
    assert response.status_code == 200
    assert rows_of(response) == ["weather::get_forecast"]


def test_a_user_typed_in_is_previewed_whichever_scope_is_ticked(client, superuser, member, indexed):
    """The scope a curator without tools of their own starts on is "every tool": typing a user means that user's
    view, not a name silently ignored."""
    from governance.services.permissions import permission_grant

    permission_grant(actor=superuser, target=indexed["get_forecast"], action="discover", holder=member)
    client.force_login(superuser)
    query = {"query": "weather forecast alerts storm", "top_k": 10, "as_user": "member", "scope": "every"}
    response = client.get(reverse(PREVIEW), query)
    assert rows_of(response) == ["weather::get_forecast"] and response.context["as_user"] == member


def test_tool_example_check_shows_where_the_tool_lands(client, curator, indexed, reindex):
    alerts = indexed["get_alerts"]
    add_negatives(alerts, "how warm will it be on saturday")
    add_examples(alerts, "are there any tornado warnings in kansas")
    reindex(index_update, tool_pks=[alerts.pk])
    client.force_login(curator)
    response = client.get(reverse("search_preview_tool", args=[alerts.pk]))
    assert response.status_code == 200
    checks = {check.text: check for check in response.context["checks"]}
    example = checks["is there a storm warning near me"]
    assert not example.negative and example.rank == 1 and example.ok
    assert checks["are there any tornado warnings in kansas"].rank == 1
    negative = checks["how warm will it be on saturday"]
    assert negative.negative
    # Demoted, not dropped: the check still finds the tool, below the top (None would hide a broken demotion).
    assert negative.rank is not None and negative.rank > 1
    assert 'class="check ok"' in response.content.decode()


def test_tool_example_check_needs_the_permission(client, owner, indexed):
    client.force_login(owner)
    response = client.get(reverse("search_preview_tool", args=[indexed["get_alerts"].pk]))
    assert response.status_code == 403


def test_generations_list_links_to_the_preview(client, superuser, db):
    client.force_login(superuser)
    response = client.get(reverse("admin:search_indexgeneration_changelist"))
    assert response.status_code == 200
    assert reverse("search_preview") in response.content.decode()


def test_tool_page_links_to_its_example_check(client, superuser, indexed):
    tool = indexed["get_alerts"]
    client.force_login(superuser)
    response = client.get(reverse("admin:catalog_tool_change", args=[tool.pk]))
    assert response.status_code == 200
    assert reverse("search_preview_tool", args=[tool.pk]) in response.content.decode()


def test_the_example_check_links_back_to_the_tool_page(client, curator, indexed):
    tool = indexed["get_alerts"]
    client.force_login(curator)
    html = client.get(reverse("search_preview_tool", args=[tool.pk])).content.decode()
    tool_page = reverse("admin:catalog_tool_change", args=[tool.pk])
    assert f'<a id="tool-page-link" href="{tool_page}">' in html  # where the example requests are edited


def test_where_the_gateway_would_withhold_the_curator_still_sees_the_ranking(client, curator, indexed):
    from search.preview import visible_tool_pks
    from search.services import tool_search

    query = "zebra migration patterns across the serengeti"
    gateway = tool_search(query=query, visible=visible_tool_pks(as_user=None, viewer=curator), top_k=5)
    assert gateway.abstained and gateway.matches == []

    client.force_login(curator)
    response = client.get(reverse(PREVIEW), {"query": query, "top_k": 5, "scope": "every"})
    assert response.status_code == 200
    assert response.context["outcome"].result.abstained
    assert len(rows_of(response)) == 5  # the ranking it would have returned, uncut
    assert 'data-confidence="none"' in response.content.decode() and "withheld" in response.content.decode()


@pytest.mark.parametrize("query", ["weather forecast for tomorrow", "mark the ticket as done", "play some jazz music"])
def test_the_preview_shows_the_confidence_the_gateway_gives(client, curator, indexed, query):
    from search.preview import visible_tool_pks
    from search.services import tool_search

    gateway = tool_search(query=query, visible=visible_tool_pks(as_user=None, viewer=curator), top_k=5)
    client.force_login(curator)
    response = client.get(reverse(PREVIEW), {"query": query, "top_k": 5, "scope": "every"})
    assert response.context["outcome"].result.confidence == gateway.confidence
    assert f'data-confidence="{gateway.confidence}"' in response.content.decode()
    assert gateway.confidence == {"weather": "high", "mark": "low", "play": "none"}[query.split()[0]]


def test_preview_defaults_to_the_curator_themself(client, curator, indexed):
    from governance.services.permissions import permission_grant

    permission_grant(actor=curator, target=indexed["get_forecast"], action="discover", holder=curator)
    client.force_login(curator)
    form = client.get(reverse(PREVIEW)).context["form"]
    assert form.fields["scope"].initial == "user"
    response = client.get(reverse(PREVIEW), {"query": "weather forecast alerts storm", "top_k": 10})
    assert rows_of(response) == ["weather::get_forecast"]  # only what the curator's own client may discover
    assert response.context["as_user"] == curator
    assert 'id="preview-as">curator<' in response.content.decode()


def test_every_tool_mode_never_lists_a_tool_no_client_gets(client, curator, indexed):
    from catalog.choices import ServerStatus
    from governance.models import ToolPolicy

    ToolPolicy.objects.filter(tool=indexed["get_alerts"]).update(held=True, hold_reason="changed upstream")
    indexed["read_file"].server.__class__.objects.filter(pk=indexed["read_file"].server.pk).update(
        status=ServerStatus.ARCHIVED
    )
    client.force_login(curator)
    response = client.get(reverse(PREVIEW), {"query": "weather alerts storm warning", "top_k": 20, "scope": "every"})
    listed = rows_of(response)
    assert "weather::get_forecast" in listed  # servable tools are ranked
    assert "weather::get_alerts" not in listed  # held: no client gets it
    assert not any(tool_id.startswith("files::") for tool_id in listed)  # archived server
    assert "Every tool some client may get" in response.content.decode()


def test_preview_rows_show_the_rank_score_and_its_parts_in_rank_order(client, superuser, indexed, reindex):
    add_negatives(indexed["delete_email"], "delete an email message from the archive")
    reindex(index_update, tool_pks=[indexed["delete_email"].pk])
    client.force_login(superuser)
    response = client.get(
        reverse(PREVIEW), {"query": "delete an email message from the archive", "top_k": 12, "scope": "every"}
    )
    rows = response.context["rows"]
    scores = [score for _, _, score in rows]
    assert [m.fused_rank for m, _, _ in rows] == list(range(1, len(rows) + 1))
    ranked = [s.rank_score for s in scores if not s.demoted]
    assert ranked == sorted(ranked, reverse=True)
    for match, _, score in rows:
        why = match.why_matched["score"]  # the ranking's own numbers, shown as they are
        values = {part.label: part.value for part in score.parts}
        assert values["BM25 (words)"] == why["bm25"] and values["Dense (meaning)"] == why["dense"]
        assert score.rank_score == why["rank_score"]
    demoted = next(score for match, _, score in rows if match.tool_id == "mail::delete_email")
    assert demoted.demoted and "Negative query" in [part.label for part in demoted.parts]
    assert rows[-1][0].tool_id == "mail::delete_email"
    body = response.content.decode()
    assert body.count('class="rank-score"') == len(rows) and "upstream: name" in body


def test_a_held_tools_example_check_says_no_client_gets_it(client, curator, indexed):
    from governance.models import ToolPolicy

    alerts = indexed["get_alerts"]
    client.force_login(curator)
    assert 'id="tool-not-served"' not in client.get(reverse("search_preview_tool", args=[alerts.pk])).content.decode()
    ToolPolicy.objects.filter(tool=alerts).update(held=True)
    response = client.get(reverse("search_preview_tool", args=[alerts.pk]))
    assert 'id="tool-not-served"' in response.content.decode()
    assert all(check.rank is None for check in response.context["checks"])  # never listed, as for any client


def test_a_curator_who_may_discover_nothing_previews_every_tool_unless_asking_for_their_own_view(
    client, curator, indexed
):
    """Most curators call no tools: the page and a link giving the query only (the home's button, a tool's page)
    rank among every tool for them and say why, not an empty ranking with an error to click past each time."""
    client.force_login(curator)
    page = client.get(reverse(PREVIEW))
    assert page.context["form"]["scope"].value() == "every"
    response = client.get(reverse(PREVIEW), {"query": "weather forecast"})
    html = response.content.decode()
    assert rows_of(response) and 'id="preview-empty-self"' not in html and 'id="preview-own-empty"' in html
    assert 'id="preview-confidence"' in html
    own = client.get(reverse(PREVIEW), {"query": "weather forecast", "scope": "user"})
    assert rows_of(own) == [] and 'id="preview-empty-self"' in own.content.decode()
    # No confidence for the request: "withheld, no visible tool is anywhere near a fit" would blame the request
    # (or the catalog) for what is the curator's own empty view.
    assert 'id="preview-confidence"' not in own.content.decode()


def test_a_curator_who_may_discover_tools_previews_their_own_view_by_default(client, curator, superuser, indexed):
    from governance.services.permissions import permission_grant

    permission_grant(actor=superuser, target=indexed["get_forecast"], action="discover", holder=curator)
    client.force_login(curator)
    assert client.get(reverse(PREVIEW)).context["form"]["scope"].value() == "user"
    response = client.get(reverse(PREVIEW), {"query": "weather forecast alerts storm"})
    assert rows_of(response) == ["weather::get_forecast"]


def test_why_it_matched_names_no_function_word(client, curator, indexed):
    """The preview's "why it matched" read "ping, landlord, about, rent", function words among the words that
    matched: it leaves them out as the MCP why-lines do (search.text.function_word)."""
    client.force_login(curator)
    query = "send an email about the rent to one or more recipients"
    response = client.get(reverse(PREVIEW), {"query": query, "top_k": 5, "scope": "every"})
    match, lines, _ = next(row for row in response.context["rows"] if row[0].tool_id == "mail::send_email")
    fields = match.why_matched["fields"]
    assert "more" in {word for words in fields.values() for word in words}  # in its description: it matched
    named = {word for line in lines if line.split(": ", 1)[0] in fields for word in line.split(": ", 1)[1].split(", ")}
    assert {"send", "email", "recipients"} <= named
    assert not named & {"about", "the", "to", "or", "more"}  # matched or not, no reason a curator can act on


def test_a_tools_page_opens_the_preview_for_that_tool_with_an_empty_box(client, curator, indexed):
    """The tool page's "Search preview" searched the tool's title ("Get Alerts"), which no user sends: it opens the
    preview for the tool instead, the box empty and in focus, its example requests one click each."""
    tool = indexed["get_alerts"]
    client.force_login(curator)
    curator.user_permissions.add(Permission.objects.get(codename="change_tool"))
    page = client.get(reverse("admin:catalog_tool_change", args=[tool.pk])).content.decode()
    assert f'<a id="tool-search-preview" href="{reverse(PREVIEW)}?tool={tool.pk}">Search preview</a>' in page
    response = client.get(reverse(PREVIEW), {"tool": tool.pk})
    html = response.content.decode()
    assert response.status_code == 200 and response.context["outcome"] is None and "errorlist" not in html
    assert 'placeholder="a request a user would make for weather::get_alerts"' in html and "autofocus" in html
    assert f'<input type="hidden" name="tool" value="{tool.pk}">' in html  # kept for the next search
    assert f"tool={tool.pk}&amp;query=is%20there%20a%20storm%20warning%20near%20me" in html


def test_the_preview_for_a_tool_says_where_it_ranks_and_marks_its_row(client, curator, indexed):
    tool = indexed["get_alerts"]
    client.force_login(curator)
    query = {"tool": tool.pk, "query": "is there a storm warning near me", "scope": "every"}
    html = client.get(reverse(PREVIEW), query).content.decode()
    assert 'data-tool-id="weather::get_alerts"' in html.split('id="preview-this-tool"', 1)[0].rsplit("<tr", 1)[1]
    assert "<strong>weather::get_alerts</strong> is at rank\n      <strong>1</strong> of" in html
    elsewhere = client.get(reverse(PREVIEW), {**query, "query": "send an email to bob", "top_k": 1}).content.decode()
    assert 'id="preview-this-tool"' not in elsewhere
    assert "is not\n      among the 1 tools listed for this request." in elsewhere


def test_the_preview_for_a_tool_without_examples_says_to_add_some(client, curator, indexed):
    tool = indexed["send_email"]
    client.force_login(curator)
    html = client.get(reverse(PREVIEW), {"tool": tool.pk}).content.decode()
    assert 'id="preview-tool-no-examples"' in html
    assert reverse("admin:catalog_tool_change", args=[tool.pk]) in html


def test_the_preview_is_not_opened_for_another_tenants_tool(client, django_user_model, indexed):
    """Z12: a tool of another tenant's server, asked for by its id, gives the plain preview: nothing of it shown."""
    from django.contrib.auth.models import Group

    from governance.models import ServerTenant
    from governance.roles import CURATORS
    from tests.governance.factories import tenant_with

    tenant_curator = django_user_model.objects.create_user(username="cur-a", is_staff=True)
    tenant_curator.groups.add(Group.objects.get(name=CURATORS))
    tenant_with("alpha", tenant_curator)
    theirs = indexed["get_alerts"]
    ServerTenant.objects.create(server=theirs.server, tenant=tenant_with("bravo"))
    client.force_login(tenant_curator)
    html = client.get(reverse(PREVIEW), {"tool": theirs.pk}).content.decode()
    assert 'id="preview-for-tool"' not in html and "get_alerts" not in html


def test_only_who_may_read_learned_requests_is_told_one_matched(client, curator, indexed, reindex):
    """An operator (``catalog.view_tool``, no ``search.view_learnedrequest``, no query log) typing a guess at a user's
    request was told "requests that led to this tool" when someone's close request had been followed by a call of it;
    they now see the tool's own closest text, as an agent does. A curator who reads learned requests still sees it."""
    from search.models import LearnedRequest

    request = "did I get anything from my landlord lately"
    inbox = indexed["list_inbox"]
    LearnedRequest.objects.create(tool=inbox, text=request, key=request, principal_count=3, confirmations=3)
    reindex(index_update, tool_pks=[inbox.pk])
    params = {"query": request, "top_k": 5, "scope": "every"}

    client.force_login(curator)
    response = client.get(reverse(PREVIEW), params)
    assert rows_of(response)[0] == "mail::list_inbox"
    assert "led to this tool" not in response.content.decode()
    match, lines, parts = response.context["rows"][0]
    assert match.why_matched["closest"] == "learned" and any(line.startswith("closest vector: ") for line in lines)
    assert not any("learned" in part.detail for part in parts.parts)

    curator.user_permissions.add(Permission.objects.get(codename="view_learnedrequest"))
    client.force_login(type(curator).objects.get(pk=curator.pk))  # permissions are cached on the user object
    assert "requests that led to this tool" in client.get(reverse(PREVIEW), params).content.decode()
