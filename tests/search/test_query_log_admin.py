"""From a tool's page to the logged searches that returned it: the query log narrowed to that tool, no other."""

import re

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from governance.principals import principal_for_user
from governance.roles import CURATORS, OPERATORS
from search.choices import SearchOutcomeKind
from search.models import QueryLogEntry
from search.usage import LoggedResult, query_log_record, search_outcome_record
from tests.governance.factories import ServerFactory, ToolFactory

pytestmark = pytest.mark.django_db


def _log(member, query: str, *tools) -> None:
    query_log_record(principal=principal_for_user(member), query=query, confidence="high", degraded=False,
                     results=[LoggedResult(tool_id=tool.tool_id, score=0.5) for tool in tools], backend="embedded",
                     latency_ms=4)  # fmt: skip


def test_tool_page_links_to_the_searches_that_returned_it(client, django_user_model, member):
    server = ServerFactory(slug="mail")
    send, send_draft, other = (ToolFactory(server=server, name=name) for name in ("send", "send_draft", "read"))
    _log(member, "send a mail", send, other)
    _log(member, "save a draft", send_draft)  # its id starts with the first's: not a match
    _log(member, "read my inbox", other)
    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(curator)
    page = client.get(reverse("admin:catalog_tool_change", args=[send.pk])).content.decode()
    link = re.search(r'<a id="tool-searches" href="([^"]+)">Searches that returned it</a>', page)
    assert link is not None
    listing = client.get(link.group(1).replace("&amp;", "&"))
    assert [entry.query for entry in listing.context["cl"].result_list] == ["send a mail"]
    assert "returned tool" in listing.content.decode()  # the filter in force is shown, with "All" to clear it


def test_no_link_for_who_may_not_read_the_query_log(client, django_user_model):
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="send")
    operator = django_user_model.objects.create_user(username="op", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    client.force_login(operator)
    page = client.get(reverse("admin:catalog_tool_change", args=[tool.pk]))
    assert page.status_code == 200 and "tool-searches" not in page.content.decode()


def _entry_page_queries(client, entry_pk: int, tools: int) -> int:
    with CaptureQueriesContext(connection) as queries:
        html = client.get(reverse("admin:search_querylogentry_change", args=[entry_pk])).content.decode()
    assert html.count('<a class="tool-link"') == tools  # every returned tool linked to its page
    return len(queries)


def test_an_entry_page_costs_the_same_queries_for_2_or_20_returned_tools(client, django_user_model, member):
    server = ServerFactory(slug="mail")
    tools = [ToolFactory(server=server, name=f"tool{n}") for n in range(20)]
    _log(member, "many", *tools)
    _log(member, "few", *tools[:2])  # last: the first tool's call follows it, so both searches were followed
    for tool in tools[::3]:
        search_outcome_record(principal=principal_for_user(member), tool=tool, outcome=SearchOutcomeKind.SUCCESS)
    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(curator)
    few, many = QueryLogEntry.objects.get(query="few"), QueryLogEntry.objects.get(query="many")
    _entry_page_queries(client, few.pk, 2)  # the first page fills the content-type and permission caches
    assert _entry_page_queries(client, many.pk, 20) == _entry_page_queries(client, few.pk, 2)


def test_an_entry_page_calls_the_logged_score_fit_and_says_what_orders_the_rows(client, django_user_model, member):
    """The log keeps each tool's calibrated fit, not the rank score that ordered the answer: a tool ranked first
    may have the lower fit, which a column headed "score" beside "rank" reads as a mistake."""
    server = ServerFactory(slug="mail")
    first, second = ToolFactory(server=server, name="list_inbox"), ToolFactory(server=server, name="read")
    query_log_record(principal=principal_for_user(member), query="what's in my documents folder", confidence="high",
                     results=[LoggedResult(tool_id=first.tool_id, score=0.399),
                              LoggedResult(tool_id=second.tool_id, score=0.791)],
                     degraded=False, backend="embedded", latency_ms=4)  # fmt: skip
    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(curator)
    entry = QueryLogEntry.objects.get()
    html = client.get(reverse("admin:search_querylogentry_change", args=[entry.pk])).content.decode()
    assert "<th>rank</th><th>tool</th><th>fit</th><th>what followed</th>" in html
    help_text = re.search(r'<div class="help" id="ranked-tools-help">([^<]+)</div>', html).group(1)
    assert "order the gateway returned them" in help_text and "calibrated relevance" in help_text
    assert html.index("0.399") < html.index("0.791")  # still the gateway's order


def test_the_query_log_counts_searches(client, django_user_model, member):
    """Django counts a list by its plural name: "3 query log" read as nothing; the log counts its searches."""
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="send")
    for query in ("send a mail", "mail my boss", "email the team"):
        _log(member, query, tool)
    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(curator)
    html = client.get(reverse("admin:search_querylogentry_changelist")).content.decode()
    paginator = " ".join(re.search(r'<p class="paginator">(.*?)</p>', html, re.S).group(1).split())
    assert paginator == "3 searches" and "query log</p>" not in html
    html = client.get(reverse("admin:search_querylogentry_changelist"), {"q": "boss"}).content.decode()
    assert " ".join(re.search(r'<p class="paginator">(.*?)</p>', html, re.S).group(1).split()) == "1 search"


def test_what_followed_is_shown_only_for_the_tools_the_reader_may_open(client, django_user_model, member):
    """Z12: an entry's page said how the calls of each returned tool ended, also for a tool the reader may not open
    (another tenant's, shown as plain text): whether it was called and whether that failed. Now only for the tools
    linked; the others read "—"."""
    from governance.models import ServerTenant
    from tests.governance.factories import tenant_with

    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    tenant_with("alpha", curator, member)
    ours = ToolFactory(server=ServerFactory(slug="mail"), name="send_email")
    theirs = ToolFactory(server=ServerFactory(slug="bravo-mail"), name="send")
    ServerTenant.objects.create(server=theirs.server, tenant=tenant_with("bravo"))
    _log(member, "send a mail", ours, theirs)
    for tool, outcome in ((ours, SearchOutcomeKind.SUCCESS), (theirs, SearchOutcomeKind.UPSTREAM_ERROR)):
        assert search_outcome_record(principal=principal_for_user(member), tool=tool, outcome=outcome) is not None
    client.force_login(curator)
    entry = QueryLogEntry.objects.get(query="send a mail")
    html = client.get(reverse("admin:search_querylogentry_change", args=[entry.pk])).content.decode()
    rows = re.findall(
        r'<tr class="ranked-tool"><td>\d+</td><td>(.*?)</td><td>[^<]*</td><td class="([^"]+)">([^<]*)</td>', html
    )
    assert [(state, followed) for _, state, followed in rows] == [("called", "called: Succeeded"), ("not-shown", "—")]
    assert rows[1][0] == theirs.tool_id  # named as returned, never linked
    assert "Upstream error" not in html


def _links(html: str) -> dict[str, str]:
    found = re.findall(r'<li><a id="(entry-preview|entry-workbench)" href="([^"]+)">', html)
    return {name: url.replace("&amp;", "&") for name, url in found}


def test_a_search_that_needs_a_curator_leads_to_the_preview_and_the_workbench(client, django_user_model, member):
    """A withheld search's page is no dead end: it leads to the preview (the request ranked now) and to the
    workbench, where it is attached to a tool; once attached, or for a search answered and followed, only the
    preview. An operator, who curates nothing, gets neither workbench link."""
    from catalog.models import ToolExample

    tool = ToolFactory(server=ServerFactory(slug="travel"), name="book_flight")
    query_log_record(principal=principal_for_user(member), query="book a flight to Lisbon", confidence="none",
                     degraded=False, results=[], backend="embedded", latency_ms=4)  # fmt: skip
    withheld = QueryLogEntry.objects.get()
    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(curator)
    page = reverse("admin:search_querylogentry_change", args=[withheld.pk])
    links = _links(client.get(page).content.decode())
    assert links["entry-workbench"] == f"{reverse('search_workbench')}?reason=withheld"
    workbench = client.get(links["entry-workbench"]).content.decode()
    assert 'data-text="book a flight to Lisbon"' in workbench  # the link lands on its row
    preview = client.get(links["entry-preview"])
    assert preview.context["form"].cleaned_data["query"] == "book a flight to Lisbon"
    assert preview.context["form"].cleaned_data["scope"] == "every"

    ToolExample.objects.create(tool=tool, text="book a flight to Lisbon")  # attached: nothing left to do there
    assert set(_links(client.get(page).content.decode())) == {"entry-preview"}

    _log(member, "read my inbox", tool)
    followed = QueryLogEntry.objects.get(query="read my inbox")
    search_outcome_record(principal=principal_for_user(member), tool=tool, outcome=SearchOutcomeKind.SUCCESS)
    page = reverse("admin:search_querylogentry_change", args=[followed.pk])
    assert set(_links(client.get(page).content.decode())) == {"entry-preview"}

    operator = django_user_model.objects.create_user(username="op", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    operator.user_permissions.add(*Group.objects.get(name=CURATORS).permissions.filter(codename="view_querylogentry"))
    query_log_record(principal=principal_for_user(member), query="order a pizza", confidence="none",
                     degraded=False, results=[], backend="embedded", latency_ms=4)  # fmt: skip
    pizza = reverse("admin:search_querylogentry_change", args=[QueryLogEntry.objects.get(query="order a pizza").pk])
    assert "entry-workbench" in _links(client.get(pizza).content.decode())  # the curator's
    client.force_login(operator)
    response = client.get(pizza)
    assert response.status_code == 200 and set(_links(response.content.decode())) == {"entry-preview"}


def test_an_entry_page_says_degraded_in_words_not_with_an_error_cross(client, django_user_model, member):
    """A search that ran in full is the normal case: "no", not Django's red cross for False."""
    for degraded in (False, True):
        query_log_record(principal=principal_for_user(member), query=f"degraded {degraded}", confidence="high",
                         degraded=degraded, results=[], backend="embedded", latency_ms=4)  # fmt: skip
    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(curator)
    for degraded, said in ((False, "no"), (True, "yes: ranked by words only")):
        entry = QueryLogEntry.objects.get(query=f"degraded {degraded}")
        html = client.get(reverse("admin:search_querylogentry_change", args=[entry.pk])).content.decode()
        row = html.split("Degraded:</label>", 1)[1].split("</div>", 1)[0]
        assert said in row and "icon-" not in row


def test_an_entry_page_reads_as_a_search_not_as_a_database_row(client, django_user_model, member):
    """A search's page says how long it took with its unit ("80 ms", not "Latency ms: 79.66"), not its row id, and
    has no History button: nobody changes a logged search, so its history page could only say it has none."""
    query_log_record(principal=principal_for_user(member), query="book a flight", confidence="none", degraded=False,
                     results=[], backend="embedded", latency_ms=79.66)  # fmt: skip
    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    client.force_login(curator)
    entry = QueryLogEntry.objects.get()
    html = client.get(reverse("admin:search_querylogentry_change", args=[entry.pk])).content.decode()
    labels = re.findall(r"<label>([^<]*):</label>", html)
    assert "Latency" in labels and "Latency ms" not in labels and "ID" not in labels and "Empty reason" not in labels
    assert html.split("Latency:</label>", 1)[1].split("</div>", 1)[0].split(">")[-1].strip() == "80 ms"
    assert "(none: withheld: no tool fits" in html  # why nothing was returned, in the returned tools' place
    assert "historylink" not in html and reverse("admin:search_querylogentry_history", args=[entry.pk]) not in html
