"""The curator's workbench over the query log: groups what needs a curator, attaches requests to tools."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from governance.principals import principal_for_user
from search.engine.ranking import Confidence
from search.models import SearchOutcome
from search.services import index_rebuild, tool_search
from search.usage import LoggedResult, query_log_record
from search.workbench import group_key, workbench_groups, workbench_waiting
from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

pytestmark = [pytest.mark.django_db]
WORKBENCH = "search_workbench"
WITHHELD = "ping my landlord about the rent"


def _perm(app: str, codename: str) -> Permission:
    return Permission.objects.get(codename=codename, content_type__app_label=app)


def _log(user, query, confidence=Confidence.HIGH, tools=()):
    return query_log_record(
        principal=principal_for_user(user),
        query=query,
        results=[LoggedResult(tool_id=t, score=0.5) for t in tools],
        confidence=confidence,
        degraded=False,
        backend="embedded",
        latency_ms=5,
    )


def test_similar_requests_are_grouped_with_counts_and_reasons(member):
    _log(member, "Ping my landlord about the rent", Confidence.NONE)
    _log(member, "ping  my landlord   about the RENT!", Confidence.NONE)
    _log(member, "about the rent, ping my landlord", Confidence.LOW, tools=["mail::send_email"])
    followed = _log(member, "read the file notes.txt", Confidence.HIGH, tools=["files::read_file"])
    _log(member, "list my inbox", Confidence.HIGH, tools=["mail::list_inbox"])  # answered, never followed
    from catalog.models import Tool
    from tests.search.factories import ToolFactory

    SearchOutcome.objects.create(entry=followed, tool=ToolFactory(name="read_file"), outcome="success")
    groups = {group.key: group for group in workbench_groups()}
    rent = groups[group_key(WITHHELD)]
    assert (rent.count, rent.withheld, rent.low, rent.unfollowed) == (3, 2, 1, 0)
    assert rent.text == "about the rent, ping my landlord"  # the newest wording
    assert rent.tool_ids == ["mail::send_email"]
    assert groups[group_key("list my inbox")].unfollowed == 1
    assert group_key("read the file notes.txt") not in groups  # answered and followed by a call
    assert [g.key for g in workbench_groups(reason="withheld")] == [group_key(WITHHELD)]
    assert Tool.objects.count() == 1


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)  # the reindex runs on commit, inside the request, as in production
def test_attaching_a_withheld_request_makes_the_tool_found(client, curator, member, small_catalog, encoder):
    index_rebuild()
    everyone = {tool.pk for tool in small_catalog.values()}
    assert [m.tool_id for m in tool_search(query=WITHHELD, visible=everyone).matches][:1] != ["mail::send_email"]
    _log(member, WITHHELD, Confidence.NONE)
    client.force_login(curator)
    page = client.get(reverse(WORKBENCH))
    assert page.status_code == 200 and WITHHELD in page.content.decode()
    response = client.post(
        reverse(WORKBENCH), {"text": WITHHELD, "tool_id": "mail::send_email", "kind": "example"}, follow=True
    )
    assert response.status_code == 200
    assert "It is searchable now" in response.content.decode()
    assert list(small_catalog["send_email"].examples.values_list("text", flat=True)) == [WITHHELD]
    assert tool_search(query=WITHHELD, visible=everyone).matches[0].tool_id == "mail::send_email"


def test_unknown_tool_is_refused_with_a_message_and_the_entry_kept(client, curator, member):
    _log(member, WITHHELD, Confidence.NONE)
    client.force_login(curator)
    response = client.post(reverse(WORKBENCH), {"text": WITHHELD, "tool_id": "nope::nothing", "kind": "negative"})
    html = response.content.decode()
    assert response.status_code == 200 and "no tool “nope::nothing” in the catalog" in html
    row = html.split(f'data-text="{WITHHELD}"', 1)[1].split("</tr>", 1)[0]
    assert 'value="nope::nothing" aria-invalid="true"' in row  # what was typed, to correct, not an empty box
    assert '<option value="negative" selected>' in row


def test_the_page_says_an_attached_request_is_quoted_to_every_caller_before_the_attach_buttons(client, curator, member):
    """Privacy: an attached request (another person's words) becomes an example request, which search
    explanations (why_matched) quote to every caller that finds the tool; the page says so above the forms."""
    _log(member, WITHHELD, Confidence.NONE)
    client.force_login(curator)
    html = client.get(reverse(WORKBENCH)).content.decode()
    assert (
        "These are other people's words, and an example request is quoted to every caller whose search finds its"
        " tool (it explains the match), so attach only words any of them may read" in html
    )
    assert html.index('id="attach-quoted"') < html.index('class="attach"')


def test_a_mistyped_tool_id_is_answered_with_the_closest_ones(client, curator, member):
    """A typo, or a tool's name without its server, names the tool meant: a withheld request has no returned tools
    to pick from, so the curator types the id."""
    from tests.search.factories import ToolFactory

    reset = ToolFactory(name="git_reset")
    ToolFactory(name="git_log", server=reset.server)
    _log(member, WITHHELD, Confidence.NONE)
    client.force_login(curator)
    for typed in (reset.tool_id.replace("reset", "rest"), "git_reset"):
        response = client.post(reverse(WORKBENCH), {"text": WITHHELD, "tool_id": typed, "kind": "example"})
        assert f"no tool “{typed}” in the catalog (did you mean {reset.tool_id}?)" in response.content.decode()
    response = client.post(reverse(WORKBENCH), {"text": WITHHELD, "tool_id": "weather::forecast", "kind": "example"})
    assert "no tool “weather::forecast” in the catalog. Your entry" in response.content.decode()  # nothing close


def test_an_attached_request_links_to_the_preview_that_checks_it(client, curator, member):
    from urllib.parse import parse_qs, urlsplit

    from tests.search.factories import ToolFactory

    tool = ToolFactory(name="send_email")
    _log(member, WITHHELD, Confidence.NONE)
    client.force_login(curator)
    response = client.post(
        reverse(WORKBENCH), {"text": WITHHELD, "tool_id": tool.tool_id, "kind": "example"}, follow=True
    )
    message = [str(m) for m in response.context["messages"]][0]
    link = message.split('<a id="attached-preview" href="', 1)[1].split('"', 1)[0].replace("&amp;", "&")
    assert f">See where {tool.tool_id} ranks for it now</a>" in message
    assert urlsplit(link).path == reverse("search_preview")
    assert parse_qs(urlsplit(link).query) == {
        "query": [WITHHELD], "top_k": ["10"], "scope": ["every"], "tool": [str(tool.pk)]
    }  # fmt: skip
    assert 'id="attached-preview"' in response.content.decode()  # a link on the page, not escaped text
    assert client.get(link).context["form"].cleaned_data["query"] == WITHHELD


def test_attaching_to_a_tool_that_lists_the_request_twice_says_it_is_there(client, curator, member):
    """An older tool form let a phrase be listed twice: attaching it again is "already there", not a 500."""
    from catalog.models import ToolExample
    from tests.search.factories import ToolFactory

    tool = ToolFactory(name="send_email")
    for _ in range(2):
        ToolExample.objects.create(tool=tool, text=WITHHELD)
    _log(member, WITHHELD, Confidence.NONE)
    client.force_login(curator)
    response = client.post(
        reverse(WORKBENCH), {"text": WITHHELD, "tool_id": tool.tool_id, "kind": "example"}, follow=True
    )
    assert response.status_code == 200
    assert [str(m) for m in response.context["messages"]] == [
        f"“{WITHHELD}” already was an example request of {tool.tool_id}."
    ]
    assert tool.examples.count() == 2


def test_another_tenants_tool_is_answered_like_a_missing_one(client, curator, member):
    from governance.models import ServerTenant
    from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

    tenant_with("alpha", curator)
    theirs = ToolFactory(server=ServerFactory(slug="bravo-mail"), name="send")
    ServerTenant.objects.create(server=theirs.server, tenant=tenant_with("bravo"))
    _log(member, WITHHELD, Confidence.NONE)
    client.force_login(curator)
    response = client.post(reverse(WORKBENCH), {"text": WITHHELD, "tool_id": theirs.tool_id, "kind": "example"})
    assert response.status_code == 200 and f"no tool “{theirs.tool_id}” in the catalog" in response.content.decode()
    assert not theirs.examples.exists()  # a curator of tenant alpha does not reshape tenant bravo's tool


@pytest.mark.parametrize("perms", [(), (("catalog", "view_tool"), ("catalog", "change_tool"))])
def test_needs_both_curation_and_query_log_permissions(client, django_user_model, perms):
    user = django_user_model.objects.create_user(username="staff", is_staff=True)
    user.user_permissions.add(*[_perm(app, codename) for app, codename in perms])
    client.force_login(user)
    assert client.get(reverse(WORKBENCH)).status_code == 403
    assert client.post(reverse(WORKBENCH), {"text": "x", "tool_id": "a::b", "kind": "example"}).status_code == 403


def test_the_page_leaves_out_searches_emptied_by_filters_or_access_and_says_so(client, curator, member):
    _log(member, WITHHELD, Confidence.NONE)
    query_log_record(
        principal=principal_for_user(member),
        query="what time is it in Lisbon",
        results=[],
        confidence=Confidence.NONE,
        degraded=False,
        backend="embedded",
        latency_ms=5,
        empty_reason="filtered",
    )
    client.force_login(curator)
    page = client.get(reverse(WORKBENCH)).content.decode()
    assert WITHHELD in page and "what time is it in Lisbon" not in page
    assert "1 search emptied only by the caller's own filters" in page


def test_another_tenants_example_request_never_hides_a_request(client, curator, member):
    """A group leaves the page once its wording is an example (or negative) of a tool: of any tool, before. So tenant
    bravo's curators emptied tenant alpha's workbench, and alpha's curator learned which words bravo's tools list."""
    from governance.models import ServerTenant
    from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

    tenant_with("alpha", curator, member)
    theirs = ToolFactory(server=ServerFactory(slug="bravo-mail"), name="send")
    ServerTenant.objects.create(server=theirs.server, tenant=tenant_with("bravo"))
    theirs.examples.create(text=WITHHELD)
    _log(member, WITHHELD, Confidence.NONE)
    assert [group.text for group in workbench_groups(user=curator)] == [WITHHELD]
    client.force_login(curator)
    assert WITHHELD in client.get(reverse(WORKBENCH)).content.decode()


def test_each_returned_tool_links_to_its_page_where_the_curator_may_open_it(client, curator, member):
    """From a request to the tools it got: the curator opens a tool's page from the row (to read its purpose,
    add an alias); another tenant's tool in the log stays plain text, with no link to a page they cannot open."""
    from governance.models import ServerTenant
    from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

    tenant_with("alpha", curator, member)
    ours = ToolFactory(server=ServerFactory(slug="mail"), name="send_email")
    theirs = ToolFactory(server=ServerFactory(slug="bravo-mail"), name="send")
    ServerTenant.objects.create(server=theirs.server, tenant=tenant_with("bravo"))
    _log(member, WITHHELD, Confidence.LOW, tools=[ours.tool_id, theirs.tool_id])
    client.force_login(curator)
    page = client.get(reverse(WORKBENCH))
    [group] = page.context["groups"]
    ours_url = reverse("admin:catalog_tool_change", args=[ours.pk])
    assert group.returned == [(ours.tool_id, ours_url), (theirs.tool_id, "")]
    html = page.content.decode()
    assert f'<a class="tool-link" href="{ours_url}">{ours.tool_id}</a>' in html
    assert reverse("admin:catalog_tool_change", args=[theirs.pk]) not in html
    assert client.get(ours_url).status_code == 200


def test_an_empty_filter_says_so_and_leads_back_to_every_kind(client, curator, member):
    _log(member, "list my inbox", Confidence.HIGH, tools=["mail::list_inbox"])  # answered, not followed
    client.force_login(curator)
    html = client.get(reverse(WORKBENCH) + "?reason=withheld").content.decode()
    assert "No request of this kind waits" in html and 'href="?">show all kinds</a>' in html
    assert "every request agents sent" not in html  # not "nothing to work on": one waits under another kind
    assert "list my inbox" in client.get(reverse(WORKBENCH)).content.decode()


def test_try_in_the_preview_ranks_among_every_tool(client, curator, member):
    """The requests are other people's: the preview they link to ranks every tool some client may get, not the
    curator's own view (a curator who may discover nothing would see an empty, "withheld" answer)."""
    _log(member, WITHHELD, Confidence.NONE)
    client.force_login(curator)
    html = client.get(reverse(WORKBENCH)).content.decode()
    href = html.split(">try in the preview</a>", 1)[0].rsplit('href="', 1)[1].replace("&amp;", "&")
    assert href.startswith(reverse("search_preview")) and "scope=every" in href
    page = client.get(href)
    assert page.status_code == 200 and page.context["as_user"] is None  # "Every tool some client may get"


def test_more_groups_than_the_page_lists_are_counted_and_the_page_says_so(client, curator, member, monkeypatch):
    # At a year's volume the first 100 groups were counted: the curator's home said 100 (99 after an attach) and
    # the page listed 100 with no word of the 1,029 more waiting.
    monkeypatch.setattr("search.workbench.MAX_GROUPS", 2)
    for text in ("book a flight to oslo", "water the office plants", "order more printer toner"):
        _log(member, text, Confidence.NONE)
    client.force_login(curator)
    html = client.get(reverse(WORKBENCH)).content.decode()
    assert html.count('class="request-group"') == 2
    assert "The newest 2 of 3 groups waiting are shown" in html
    assert "order more printer toner" in html and "book a flight to oslo" not in html
    assert workbench_waiting(user=curator)["total"] == 3  # the home page's count
    one = client.get(reverse(WORKBENCH), {"reason": "withheld"}).content.decode()
    assert "The newest 2 of 3" in one


def test_an_empty_workbench_leads_to_the_search_preview(client, curator):
    """With nothing to work on the page ended there (a curator's first visit, before any search): it now says where
    to check how a request is answered, the search preview, and that link opens for the curator."""
    client.force_login(curator)
    response = client.get(reverse("search_workbench"))
    html = response.content.decode()
    assert 'id="workbench-empty"' in html
    link = f'<a id="workbench-try-preview" href="{reverse("search_preview")}">search preview</a>'
    assert link in html
    assert client.get(reverse("search_preview")).status_code == 200


EMAIL = ("send an email to bob", "send email to Bob please", "send an e-mail to bob")


def test_paraphrases_are_one_group_showing_its_wordings_and_one_attach_handles_it(client, curator, member):
    """Issue 8: the same request in other words (stopwords, case, a hyphen, "please") was three groups, three times
    the same work. It is one, with its distinct wordings and how often each was asked; attaching it handles all."""
    for text in (*EMAIL, "Send an email to Bob"):
        _log(member, text, Confidence.NONE)
    _log(member, "send an email to alice", Confidence.LOW)  # another person: another request
    groups = workbench_groups(user=curator)
    assert [(group.text, group.count) for group in groups] == [
        ("send an email to alice", 1),
        ("Send an email to Bob", 4),
    ]
    assert groups[1].wordings == [("Send an email to Bob", 2), (EMAIL[2], 1), (EMAIL[1], 1)]  # as asked last
    assert groups[0].wordings == [("send an email to alice", 1)]
    client.force_login(curator)
    html = client.get(reverse(WORKBENCH)).content.decode()
    row = html.split('data-text="Send an email to Bob"', 1)[1].split("</tr>", 1)[0]
    bob = "Send an email to Bob"
    assert f'<li class="wording" data-text="{bob}">{bob} <span class="wording-count">×2</span></li>' in row
    assert f'data-text="{EMAIL[1]}"' in row and f'data-text="{EMAIL[2]}"' in row
    alice = html.split('data-text="send an email to alice"', 1)[1].split("</tr>", 1)[0]
    assert 'class="wordings"' not in alice  # one wording: said once, as the request

    ToolFactory(server=ServerFactory(slug="mail"), name="send_email")
    client.post(reverse(WORKBENCH), {"text": EMAIL[2], "tool_id": "mail::send_email", "kind": "example"})
    assert [group.text for group in workbench_groups(user=curator)] == ["send an email to alice"]


def test_another_tenants_paraphrases_never_join_or_show_in_a_group(client, curator, member, django_user_model):
    """Z12: grouping reads only what the curator may read: tenant bravo's paraphrase neither joins nor counts in
    alpha's group, nor shows among its wordings; a superuser, who reads both, sees them as one."""
    tenant_with("alpha", curator, member)
    asker = django_user_model.objects.create_user(username="bravo-agent")
    tenant_with("bravo", asker)
    _log(member, EMAIL[0], Confidence.NONE)
    _log(asker, "Send an e-mail to Bob, the Zephyr auditor", Confidence.NONE)
    _log(asker, EMAIL[1], Confidence.NONE)
    [group] = workbench_groups(user=curator)
    assert (group.text, group.count, group.wordings) == (EMAIL[0], 1, [(EMAIL[0], 1)])
    client.force_login(curator)
    html = client.get(reverse(WORKBENCH)).content.decode()
    assert "Zephyr" not in html and EMAIL[1] not in html
    boss = django_user_model.objects.create_superuser(username="boss")
    assert [(group.text, group.count) for group in workbench_groups(user=boss)] == [
        (EMAIL[1], 2),
        ("Send an e-mail to Bob, the Zephyr auditor", 1),
    ]
