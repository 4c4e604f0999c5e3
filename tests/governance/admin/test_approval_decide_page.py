"""The request's own page is the decide page: the approver reads what the tool does and its risk (without any
catalog permission), and Approve and Deny look different."""

import pytest
from django.urls import reverse
from django.utils import timezone

from governance.choices import ApprovalStatus
from governance.services.approvals import approval_request_create

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending(pending_approval, mutating_tool):
    # What the page reads of the tool live (its definition hash, which the request keeps, is not recomputed).
    mutating_tool.description = "Deletes a repository <b>forever</b>."
    mutating_tool.annotations = {"destructiveHint": True}
    mutating_tool.save()
    return pending_approval


def test_request_page_shows_the_tool_and_risk_and_decides(client, approver, pending):
    client.force_login(approver)
    assert not approver.has_perm("catalog.view_tool")
    page = client.get(reverse("admin:governance_approvalrequest_change", args=[pending.pk]))
    html = page.content.decode()
    assert page.status_code == 200
    assert "Deletes a repository &lt;b&gt;forever&lt;/b&gt;." in html  # escaped upstream text
    assert "&quot;destructiveHint&quot;: true" in html
    assert 'class="scout-risk risk-high"' in html
    assert 'class="scout-button scout-approve" name="_approve"' in html
    assert 'class="scout-button scout-deny" name="_deny"' in html
    response = client.post(
        reverse("admin:governance_approvalrequest_change", args=[pending.pk]),
        {"reason": "not today", "_deny": "1"},
        follow=True,
    )
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.DENIED
    message = [str(m) for m in response.context["messages"]][0]
    assert message.startswith(f"Denied github::delete_repo for member ({pending.approval_id}): ")  # the call first


def test_inbox_leads_each_row_with_the_call_then_decide_who_and_when_and_the_id_last(client, approver, pending):
    """Each row led with the request's opaque id (apr_...), so an approver read ids: it now leads with the call,
    linked to its page, then Decide; who asked says when; the id comes last."""
    client.force_login(approver)
    html = client.get(reverse("admin:governance_approvalrequest_changelist")).content.decode()
    row = html.split("<tbody>", 1)[1].split("</tr>", 1)[0]
    cells = [cell.split('"', 1)[0] for cell in row.split('class="field-')[1:]]
    assert cells == ["tool_column", "decide_link", "status_column", "risk_badge", "requester_column", "request_column"]
    call = row.split('class="field-tool_column"', 1)[1].split("</td>", 1)[0]
    page = reverse("admin:governance_approvalrequest_change", args=[pending.pk])
    assert f'<a href="{page}">github::<wbr>delete_<wbr>repo</a>' in call  # breaks at "::" and "_" only
    asked = row.split('class="field-requester_column"', 1)[1].split("</td>", 1)[0]
    assert f"{timezone.localtime(pending.created_at):%Y-%m-%d %H:%M}" in asked
    assert pending.approval_id in row.split('class="field-request_column"', 1)[1]
    assert (
        pending.approval_id not in row.split('class="field-tool_column"', 1)[1].split('class="field-request_column"')[0]
    )


def _why(client, request) -> str:
    html = client.get(reverse("admin:governance_approvalrequest_change", args=[request.pk])).content.decode()
    return " ".join(html.split('id="decide-why"', 1)[1].split("</div>", 1)[0].split())


def test_the_page_says_which_risk_rule_held_the_call_and_where_the_risk_came_from(
    client, approver, pending, member_token, mutating_tool, superuser
):
    """The decide page showed the risk but not why the call waited: now the risk class's rule that held it, then
    whether the class is the server's hints read by Scout, Scout's stricter note, or an admin's classification."""
    from governance.choices import OperationClass, Reversibility, RiskLevel
    from tests.governance.conftest import classify

    client.force_login(approver)
    why = _why(client, pending)
    assert "The High risk class&#x27;s rule: every call of a tool of this class needs an approval." in why
    assert "from the server&#x27;s own hints (High risk, Write)" in why
    assert "the server marks it destructive (destructiveHint true)." in why

    policy = mutating_tool.policy
    classify(policy, actor=superuser, operation_class=OperationClass.WRITE, reversibility=Reversibility.REVERSIBLE,
             risk=RiskLevel.MODERATE, classification_note="only archives: restorable for 30 days")  # fmt: skip
    _, _, principal = member_token
    moderate = approval_request_create(principal=principal, tool=mutating_tool, arguments={"name": "other"})
    why = _why(client, moderate)
    assert "The Moderate risk class&#x27;s rule: a tool of this class that changes something" in why
    assert "(its operation is Write, not Read) needs an approval for every call." in why
    assert "An admin classified the tool Moderate risk, Write on " in why
    assert ": only archives: restorable for 30 days" in why
    # The first request was held as High; the tool is Moderate now, and its page says so, not the new source.
    assert "classified again since this call was asked: it is now Moderate risk, Write." in _why(client, pending)


def test_a_decided_request_reads_as_its_record_with_what_became_of_it(client, approver, pending, member_token):
    from governance.services.approvals import approval_consume, approval_decide

    _, _, principal = member_token
    page = reverse("admin:governance_approvalrequest_change", args=[pending.pk])
    client.force_login(approver)
    undecided = client.get(page)
    # The call as a person reads it first (tool, who asked, with what); the opaque id on the page under it.
    assert undecided.context["title"] == f'Decide {pending.tool.tool_id} for member: name: "repo"'
    assert f"request {pending.approval_id}" in undecided.content.decode()
    assert "· decide before" in undecided.content.decode()

    approval_decide(request=pending, approver=approver, approve=True, reason="")
    approval_consume(
        approval_id=pending.approval_id, principal=principal, tool=pending.tool, arguments={"name": "repo"}
    )
    used = client.get(page)
    outcome = used.content.decode().split('id="approval-outcome"', 1)[1].split("</p>", 1)[0]
    # Nothing left to decide: the request's record, what became of it first.
    assert used.context["title"] == f'Approval request (used): {pending.tool.tool_id} for member: name: "repo"'
    assert "Used" in outcome and "the agent made the call" in outcome and "decided by approver" in outcome
    assert "expires" not in outcome and "decide before" not in outcome
    assert 'name="_approve"' not in used.content.decode()


def test_the_page_leads_to_the_tool_the_token_and_the_audit_trail_for_who_may_open_them(
    client, approver, superuser, pending
):
    """From a pending request to what an operator checks before deciding: the tool's page, the API token the call
    came with and this request in the audit trail. An approver without those permissions gets no dead links."""
    page = reverse("admin:governance_approvalrequest_change", args=[pending.pk])
    client.force_login(superuser)
    related = client.get(page).context["related"]
    urls = dict(related).values()
    assert [label.split(" ")[1] for label, _ in related] == ["tool", "API", "request"]
    assert reverse("admin:catalog_tool_change", args=[pending.tool.pk]) in urls
    assert reverse("admin:governance_apitoken_change", args=[pending.token.pk]) in urls
    for url in urls:
        assert client.get(url).status_code == 200, url
    audit = client.get(dict(related)["This request in the audit trail"])
    refs = {event.approval_ref for event in audit.context["cl"].result_list}
    assert refs == {pending.approval_id}  # this request's events, and only those

    client.force_login(approver)  # approve on the server, no catalog, token or audit permission
    response = client.get(page)
    assert response.context["related"] == [] and 'id="approval-related"' not in response.content.decode()


def test_an_approvers_history_lists_what_they_decided(client, approver, pending, member_token, mutating_tool):
    from governance.services.approvals import approval_decide

    _, _, principal = member_token
    other = approval_request_create(principal=principal, tool=mutating_tool, arguments={"name": "other"})
    approval_decide(request=pending, approver=approver, approve=False, reason="not today")
    client.force_login(approver)
    inbox = reverse("admin:governance_approvalrequest_changelist")
    assert 'href="?decided=me"' in client.get(inbox).content.decode()  # offered in the filter sidebar
    mine = client.get(inbox, {"decided": "me"}).context["cl"].result_list
    assert [request.pk for request in mine] == [pending.pk]
    assert other.pk in [request.pk for request in client.get(inbox).context["cl"].result_list]


def test_the_call_is_read_before_the_buttons_that_decide_it(client, approver, pending):
    """The buttons come after the call they decide: who asked and the exact arguments are above them (on a
    phone the buttons came first and the arguments two screens below them)."""
    client.force_login(approver)
    html = client.get(reverse("admin:governance_approvalrequest_change", args=[pending.pk])).content.decode()
    call = html.index('id="decide-call"')
    assert call < html.index('id="decide-arguments"') < html.index('name="_approve"')
    asker = html.split('id="decide-asker"', 1)[1].split("</p>", 1)[0]
    assert "Asked by <strong>member</strong>" in asker
    assert "&quot;name&quot;: &quot;repo&quot;" in html.split('id="decide-arguments"', 1)[1].split("</div>", 1)[0]


def test_a_denial_without_a_reason_marks_the_box_and_keeps_the_page(client, approver, pending):
    client.force_login(approver)
    page = reverse("admin:governance_approvalrequest_change", args=[pending.pk])
    response = client.post(page, {"reason": "  ", "_deny": "1"})
    html = response.content.decode()
    assert response.status_code == 409
    box = html.split('<textarea name="reason"', 1)[1].split(">", 1)[0]
    assert 'aria-invalid="true"' in box and "autofocus" in box
    assert 'id="reason-missing"' in html
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.PENDING
    assert 'aria-invalid="true"' not in client.get(page).content.decode()  # only after a refused denial


def test_after_a_decision_the_message_leads_to_the_next_waiting_request(
    client, approver, pending, member_token, mutating_tool
):
    """One click from a decision to the next one, not back through the inbox; the approver's last one says so."""
    _, _, principal = member_token
    following = approval_request_create(principal=principal, tool=mutating_tool, arguments={"name": "other"})
    client.force_login(approver)
    response = client.post(
        reverse("admin:governance_approvalrequest_change", args=[pending.pk]), {"_approve": "1"}, follow=True
    )
    message = [str(m) for m in response.context["messages"]][0]
    decide = reverse("admin:governance_approvalrequest_decide", args=[following.pk])
    assert message.startswith(f"Approved github::delete_repo for member ({pending.approval_id})")
    assert f'Next: <a id="next-approval" href="{decide}">github::delete_repo, high risk</a>.' in message
    assert f'href="{decide}"' in response.content.decode()  # rendered as a link, not escaped text

    response = client.post(decide, {"reason": "one is enough", "_deny": "1"}, follow=True)
    message = [str(m) for m in response.context["messages"]][0]
    assert message.endswith("Nothing else waits for you.") and "next-approval" not in message


def test_a_request_whose_requester_lost_access_says_so_and_offers_only_deny(client, approver, pending):
    """The inbox row said "no longer usable", but the page offered Approve, which was then refused and voided the
    request: the page says it before the click, and denying (the agent is told why) still works."""
    from governance.models import ServerUserObjectPermission

    client.force_login(approver)
    page = reverse("admin:governance_approvalrequest_change", args=[pending.pk])
    assert 'id="lost-access"' not in client.get(page).content.decode()
    ServerUserObjectPermission.objects.filter(user=pending.requester, permission__codename="execute_server").delete()
    html = client.get(page).content.decode()
    assert 'id="lost-access"' in html and "approving is refused" in html
    assert 'name="_approve"' not in html and 'name="_deny"' in html
    client.post(page, {"reason": "they left the team", "_deny": "1"})
    pending.refresh_from_db()
    assert pending.status == ApprovalStatus.DENIED


def test_arguments_read_as_written_with_what_hides_or_disguises_escaped(
    client, approver, member_token, mutating_tool, pending
):
    """An approver reads "Böen" and "Привет" as written (the decide page showed "B\\u00f6en"), while a Cyrillic "а"
    in a Latin word and a right-to-left override stay visible as escapes, on the decide page and in the inbox."""
    _, _, principal = member_token
    arguments = {"message": "Orkanartige Böen · Привет", "to": "pаypal.com\u202etxt.exe"}
    request = approval_request_create(principal=principal, tool=mutating_tool, arguments=arguments)
    client.force_login(approver)
    html = client.get(reverse("admin:governance_approvalrequest_change", args=[request.pk])).content.decode()
    shown = html.split('id="decide-arguments"', 1)[1].split("</div>", 1)[0]
    assert "Orkanartige Böen · Привет" in shown
    assert "p\\u0430ypal.com\\u202etxt.exe" in shown and "\u202e" not in shown
    assert 'id="arguments-revealed"' in shown
    plain = client.get(reverse("admin:governance_approvalrequest_change", args=[pending.pk])).content.decode()
    assert 'id="arguments-revealed"' not in plain  # nothing escaped, nothing to explain
    inbox = client.get(reverse("admin:governance_approvalrequest_changelist")).content.decode()
    assert "Orkanartige Böen · Привет" in inbox and "p\\u0430ypal.com\\u202etxt.exe" in inbox
    assert "\u202e" not in inbox


def test_the_page_quotes_scouts_note_where_it_overruled_the_servers_hints(
    client, approver, member_token, grant, server
):
    from tests.governance.factories import ToolFactory

    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    grant(approver, server, "approve")
    tool = ToolFactory(
        server=server, name="purge_cache", description="Purges the cache.", annotations={"readOnlyHint": True}
    )
    request = approval_request_create(principal=principal, tool=tool, arguments={})
    client.force_login(approver)
    why = _why(client, request)
    assert "The High risk class&#x27;s rule: every call" in why
    assert "Scout&#x27;s default (High risk, Write), stricter than the server&#x27;s hints: Hints contradict" in why
    assert "readOnlyHint is true but its name or description says &#x27;purge&#x27;" in why


def test_the_breadcrumb_names_the_call_and_leaves_its_arguments_to_the_title(client, approver, pending, member_token):
    """Adminux24: the breadcrumb repeated the whole title, the tool, who asked and the arguments, in three lines
    above the same words; it names the call (the tool, who asked), and the title under it keeps the arguments. The
    message after a decision names the call the same way."""
    from html import unescape

    _, _, principal = member_token
    long = approval_request_create(
        principal=principal, tool=pending.tool, arguments={"name": "the quarterly planning notes of the whole team"}
    )
    client.force_login(approver)
    html = client.get(reverse("admin:governance_approvalrequest_decide", args=[long.pk])).content.decode()
    trail = unescape(html.split('<div class="breadcrumbs">', 1)[1].split("</div>", 1)[0])
    assert trail.rstrip().endswith("› Decide github::delete_repo for member"), trail
    assert "quarterly" not in trail
    heading = unescape(html.split("<h1>", 1)[1].split("</h1>", 1)[0])
    assert heading.startswith('Decide github::delete_repo for member: name: "the quarterly planning')
    decided = client.post(
        reverse("admin:governance_approvalrequest_decide", args=[long.pk]), {"reason": "no", "_deny": "1"}, follow=True
    )
    assert [str(m) for m in decided.context["messages"]][0].startswith(
        f"Denied github::delete_repo for member ({long.approval_id}): "
    )
    html = client.get(reverse("admin:governance_approvalrequest_decide", args=[long.pk])).content.decode()
    trail = unescape(html.split('<div class="breadcrumbs">', 1)[1].split("</div>", 1)[0])
    assert trail.rstrip().endswith("› Approval request (denied): github::delete_repo for member"), trail
