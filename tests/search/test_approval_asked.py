"""An approver deciding a pending call reads what the agent was asked: the request of the search the query log
linked the call to, as the log stored it (redacted stays redacted), on the decide page of that call only; another
tenant's approver never reads it, and nothing shows without a linked search."""

import re
from html import unescape

import pytest
from django.urls import reverse

from governance.models import ApprovalRequest
from governance.services.permissions import permission_grant
from mcpgateway.services.execution import execute_prepare
from search.usage import LoggedResult, query_log_record
from tests.governance.factories import ServerFactory, ToolFactory, tenant_token, tenant_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(superuser, member, approver):
    """A high-risk tool on a shared server; ``member`` calls it acting in tenant acme, whose approver decides."""
    server = ServerFactory(slug="github")
    tool = ToolFactory(server=server, name="delete_repo", description="Deletes a repository.", annotations=None)
    _, _, principal = tenant_token(member, "acme")
    tenant_with("acme", approver)
    for holder, action in ((member, "discover"), (member, "execute"), (approver, "approve")):
        permission_grant(actor=superuser, target=server, action=action, holder=holder)
    return {"tool": tool, "principal": principal, "server": server}


def _call(world, *, searched: str | None) -> ApprovalRequest:
    """The agent's execute_tool (after a tool_search of ``searched`` that returned the tool, if given): it waits
    for approval."""
    tool, principal = world["tool"], world["principal"]
    if searched is not None:
        query_log_record(principal=principal, query=searched, results=[LoggedResult(tool_id=tool.tool_id, score=0.9)],
                         confidence="high", degraded=False, backend="embedded", latency_ms=1.0)  # fmt: skip
    result = execute_prepare(principal=principal, tool_id=tool.tool_id, arguments={"name": "old-site"})
    assert result.structured_content["approval_required"] is True
    return ApprovalRequest.objects.get(approval_id=result.structured_content["approval_id"])


def _asked(client, request: ApprovalRequest) -> str | None:
    page = client.get(reverse("admin:governance_approvalrequest_decide", args=[request.pk]))
    assert page.status_code == 200
    found = re.search(r'<p id="decide-asked">Asked: <q>(.*?)</q>', page.content.decode(), re.S)
    return unescape(found.group(1)) if found else None


def test_the_approver_reads_what_the_agent_was_asked(client, approver, world):
    request = _call(world, searched="delete the <b>old</b> website repo")
    client.force_login(approver)
    assert _asked(client, request) == "delete the <b>old</b> website repo"  # the user's words, escaped on the page
    page = client.get(reverse("admin:governance_approvalrequest_decide", args=[request.pk])).content.decode()
    assert "&lt;b&gt;old&lt;/b&gt;" in page


def test_a_redacted_log_shows_the_request_redacted(client, approver, world, settings):
    settings.SCOUT_QUERY_LOG = "redacted"
    request = _call(world, searched="delete repo 42 that bob@example.com made")
    client.force_login(approver)
    assert _asked(client, request) == "delete repo ## that <email> made"


def test_nothing_is_shown_with_the_log_off_or_without_a_search(client, approver, world, settings):
    client.force_login(approver)
    assert _asked(client, _call(world, searched=None)) is None  # no search before the call
    settings.SCOUT_QUERY_LOG = "off"
    assert _asked(client, _call(world, searched="delete the old website repo")) is None


def test_another_tenants_approver_never_reads_it(client, superuser, django_user_model, world):
    request = _call(world, searched="delete the old website repo")
    other = django_user_model.objects.create_user(username="globex-approver", is_staff=True)
    tenant_with("globex", other)
    permission_grant(actor=superuser, target=world["server"], action="approve", holder=other)
    client.force_login(other)
    page = client.get(reverse("admin:governance_approvalrequest_decide", args=[request.pk]))
    assert page.status_code == 404 and "website repo" not in page.content.decode()
    inbox = client.get(reverse("admin:governance_approvalrequest_changelist")).content.decode()
    assert request.approval_id not in inbox and "website repo" not in inbox


def _later(client, request: ApprovalRequest) -> str:
    page = client.get(reverse("admin:governance_approvalrequest_decide", args=[request.pk])).content.decode()
    found = re.search(r'<p id="decide-asked-later">(.*?)</p>', page, re.S)
    return " ".join(unescape(re.sub(r"<[^>]+>", "", found.group(1))).split()) if found else ""


def test_a_later_search_before_the_call_is_said_with_the_linked_one(client, approver, world):
    """adminux25: "Asked" quoted an earlier search that listed the tool ("book a table ..."), though the agent's
    search just before the call was another one, withheld: the approver took the earlier request for the current
    one. The linked search is said for what it is, and the last one before the call after it."""
    principal, tool = world["principal"], world["tool"]
    client.force_login(approver)
    query_log_record(principal=principal, query="book a table for four at eight", results=[],
                     confidence="none", degraded=False, backend="embedded", latency_ms=1.0)  # fmt: skip
    request = _call(world, searched="delete the old website repo")
    assert _later(client, request) == ""  # the search just before the call is the linked one: nothing more
    query_log_record(principal=principal, query="what is on the website repo", results=[],
                     confidence="none", degraded=False, backend="embedded", latency_ms=1.0)  # fmt: skip
    query_log_record(principal=principal, query="now wipe every repo of acme", results=[],
                     confidence="none", degraded=False, backend="embedded", latency_ms=1.0)  # fmt: skip
    again = execute_prepare(principal=principal, tool_id=tool.tool_id, arguments={"name": "other-site"})
    request = ApprovalRequest.objects.get(approval_id=again.structured_content["approval_id"])
    assert _asked(client, request) == "delete the old website repo"
    assert _later(client, request) == (
        "Searched after it, before this call: now wipe every repo of acme (its last search of 2 after the one "
        "above; it did not list this tool)"
    )


def test_what_hides_or_reorders_the_agents_words_is_shown_escaped(client, approver, world):
    """redteam52: the query log keeps a request as the agent sent it, and the decide page quoted it so: a right-to-left
    override (U+202E) reversed the rest of the line as a browser lays it out, so "Asked" could read otherwise than the
    agent asked (the arguments beside it were already shown with such characters escaped, adminux21). Both quoted
    searches now read as the arguments do: letters as written, what hides or disguises as a \\u escape."""
    principal = world["principal"]
    client.force_login(approver)
    request = _call(world, searched="tidy the readme of old-site \u202eetis-dlo kcolb ton od")
    query_log_record(principal=principal, query="now wipe \u200bevery rеpo of Böen", results=[],
                     confidence="none", degraded=False, backend="embedded", latency_ms=1.0)  # fmt: skip
    again = execute_prepare(principal=principal, tool_id=world["tool"].tool_id, arguments={"name": "other-site"})
    request = ApprovalRequest.objects.get(approval_id=again.structured_content["approval_id"])
    page = client.get(reverse("admin:governance_approvalrequest_decide", args=[request.pk])).content.decode()
    assert not [ch for ch in ("\u202e", "\u200b", "е") if ch in page]  # the override, a zero-width space, Cyrillic е
    assert _asked(client, request) == "tidy the readme of old-site \\u202eetis-dlo kcolb ton od"
    later = "Searched after it, before this call: now wipe \\u200bevery r\\u0435po of Böen"
    assert _later(client, request).startswith(later)
