"""The workbench names the tool an agent went on to call after a withheld or low-confidence request, from the query
log's links of calls to searches: the call the request itself led to, or the one its rephrasing (the same caller's
next search) did. A curator attaches the request to that tool in one click (adminux34)."""

from datetime import timedelta
from html import unescape

import pytest
from django.urls import reverse

from governance.models import ServerTenant
from governance.principals import principal_for_user
from search.engine.ranking import Confidence
from search.models import SearchOutcome
from search.usage import LoggedResult, query_log_record, search_outcome_record
from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

pytestmark = [pytest.mark.django_db]
WORKBENCH = "search_workbench"
WITHHELD = "jot down that Dana drinks green tea"
REPHRASED = "remember that Dana likes green tea"


@pytest.fixture
def remember():
    return ToolFactory(server=ServerFactory(slug="memory"), name="create_entities")


def _search(user, query, confidence=Confidence.HIGH, tools=()):
    return query_log_record(
        principal=principal_for_user(user),
        query=query,
        results=[LoggedResult(tool_id=tool.tool_id, score=0.5) for tool in tools],
        confidence=confidence,
        degraded=False,
        backend="embedded",
        latency_ms=5,
    )


def _call(user, tool, outcome="success"):
    return search_outcome_record(principal=principal_for_user(user), tool=tool, outcome=outcome)


def _row(client, text: str) -> str:
    html = client.get(reverse(WORKBENCH)).content.decode()
    return unescape(" ".join(html.split(f'data-text="{text}"', 1)[1].split("</tr>", 1)[0].split()))


def test_a_withheld_request_names_the_tool_its_rephrasing_called_and_attaches_to_it(client, curator, member, remember):
    _search(member, WITHHELD, Confidence.NONE)
    _search(member, REPHRASED, Confidence.LOW, tools=[remember])
    assert _call(member, remember, "pending_approval") is not None  # linked by the log to the rephrasing
    client.force_login(curator)
    row = _row(client, WITHHELD)
    called = row.split('class="called"', 1)[1].split("</div> </div>", 1)[0]
    assert f'data-tool="{remember.tool_id}"' in called
    assert '<span class="called-outcomes">waiting for approval ×1</span>' in called
    assert f'<span class="called-after">after searching “{REPHRASED}”</span>' in called
    # The rephrasing's own row names the same call, as its own (no "after searching").
    own = _row(client, REPHRASED).split('class="called"', 1)[1]
    assert f'data-tool="{remember.tool_id}"' in own and "called-after" not in own.split("</form>", 1)[0]
    # One click: the request becomes an example request of that tool.
    response = client.post(
        reverse(WORKBENCH), {"text": WITHHELD, "tool_id": remember.tool_id, "kind": "example"}, follow=True
    )
    assert response.status_code == 200
    assert list(remember.examples.values_list("text", flat=True)) == [WITHHELD]
    assert f'<button type="submit">Attach to {remember.tool_id}</button>' in called


def test_only_the_same_callers_next_search_counts_and_only_in_the_window(
    client, settings, curator, member, outsider, remember
):
    """Another caller's call, a call after a later step of the task (the search after the rephrasing) and a call past
    SCOUT_QUERY_LINK_WINDOW_SECONDS are no answer to the request: none is named."""
    clock = ToolFactory(server=ServerFactory(slug="time"), name="get_current_time")
    _search(member, WITHHELD, Confidence.NONE)
    _search(outsider, REPHRASED, Confidence.HIGH, tools=[remember])
    _call(outsider, remember)  # someone else's
    _search(member, "book a table for two", Confidence.NONE)  # the member's next search: no call
    _search(member, "what time is it in Tokyo", Confidence.HIGH, tools=[clock])
    _call(member, clock)  # the step after: not this request's
    client.force_login(curator)
    assert 'class="called"' not in _row(client, WITHHELD)

    late = "note that Erin likes coffee"
    _search(member, late, Confidence.LOW, tools=[remember])
    outcome = _call(member, remember)
    assert 'class="called"' in _row(client, late)
    SearchOutcome.objects.filter(pk=outcome.pk).update(
        created_at=outcome.created_at + timedelta(seconds=settings.SCOUT_QUERY_LINK_WINDOW_SECONDS + 1)
    )
    assert 'class="called"' not in _row(client, late)


def test_another_tenants_tool_is_never_named(client, curator, member):
    """Z12: a call of a tool of a server the curator may not manage is left out (its id is another tenant's)."""
    tenant_with("alpha", curator, member)
    theirs = ToolFactory(server=ServerFactory(slug="bravo-mail"), name="send")
    ServerTenant.objects.create(server=theirs.server, tenant=tenant_with("bravo"))
    _search(member, WITHHELD, Confidence.LOW, tools=[theirs])
    assert _call(member, theirs, "denied") is not None
    client.force_login(curator)
    row = _row(client, WITHHELD)
    assert 'class="called"' not in row  # (the log's own record of what it returned is listed as it always was)


def test_the_searchs_page_in_the_query_log_names_the_call_too(client, curator, member, remember):
    """The log's entry said "not called" of every tool a low-confidence search returned, though the agent called one
    of them after asking again in other words: it names that call, as the workbench does."""
    low = _search(member, WITHHELD, Confidence.LOW, tools=[remember])
    _search(member, REPHRASED, Confidence.HIGH, tools=[remember])
    _call(member, remember)
    client.force_login(curator)
    html = client.get(reverse("admin:search_querylogentry_change", args=[low.pk])).content.decode()
    called = unescape(html.split('<div class="then-called">', 1)[1].split("</div>", 1)[0])
    page = reverse("admin:catalog_tool_change", args=[remember.pk])
    link = f'<a class="then-called-tool" href="{page}">{remember.tool_id}</a>'
    assert called == f"{link}: succeeded ×1, after searching “{REPHRASED}”"
    assert "not called" in html.split('id="ranked-tools"', 1)[1]  # this search's own results were not called


def test_a_request_rephrased_twice_names_the_call_of_a_tool_it_returned_and_no_later_step(
    client, curator, member, remember
):
    """The demo's agent asked "keep in mind…" and "remember…" (both low-confidence), then "store a note about a
    person", and called memory::create_entities: the first request was credited nothing, as only the next search's
    call counted. A rephrasing's call counts for a tool the request returned; another tool's is a later step of the
    task ("order a pizza", "book a flight", then the latest commits and a git call: the flight was credited with it)."""
    git_log = ToolFactory(server=ServerFactory(slug="git"), name="git_log")
    first = "keep in mind that Dana drinks green tea"
    _search(member, first, Confidence.LOW, tools=[remember])
    _search(member, REPHRASED, Confidence.LOW, tools=[remember])
    _search(member, "store a note about a person", Confidence.HIGH, tools=[remember])
    _call(member, remember, "pending_approval")
    pizza = "order a pizza to the office"
    _search(member, pizza, Confidence.LOW, tools=[remember])
    _search(member, "book a flight to Lisbon", Confidence.LOW, tools=[remember])
    _search(member, "show the latest commits", Confidence.HIGH, tools=[git_log])
    _call(member, git_log)
    client.force_login(curator)
    row = _row(client, first)
    assert f'data-tool="{remember.tool_id}"' in row
    assert '<span class="called-after">after searching “store a note about a person”</span>' in row
    assert 'class="called"' not in _row(client, pizza)
    # Nor for the flight, right before it: a low-confidence answer listed tools, and git_log was not one of them.
    assert 'class="called"' not in _row(client, "book a flight to Lisbon")
