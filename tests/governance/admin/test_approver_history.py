"""An approver's own decisions, one click from their home page: the history is titled as theirs and says what it
will hold while empty; the home page tells two waiting calls of one tool apart by their arguments."""

import pytest
from django.urls import reverse

from governance.services.approvals import approval_decide, approval_request_create

pytestmark = pytest.mark.django_db
INBOX = reverse("admin:governance_approvalrequest_changelist")
HISTORY = INBOX + "?decided=me"
NONE_YET = "You have decided no request yet"


@pytest.fixture
def asked(member_token, approver, grant, server, mutating_tool):
    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    grant(approver, server, "approve")
    return [
        approval_request_create(principal=principal, tool=mutating_tool, arguments={"path": f"/repo/file-{n}.txt"})
        for n in range(2)
    ]


def test_home_links_the_approvers_decisions_and_tells_calls_of_one_tool_apart(client, approver, asked):
    client.force_login(approver)
    panel = client.get(reverse("admin:index")).content.decode().split('id="approver-home"')[1].split("</section>")[0]
    assert f'id="your-decisions" href="{HISTORY}"' in panel
    assert "path: &quot;/repo/file-0.txt&quot;" in panel and "path: &quot;/repo/file-1.txt&quot;" in panel


def test_the_history_is_titled_as_the_approvers_and_says_what_it_holds_while_empty(client, approver, asked):
    client.force_login(approver)
    empty = client.get(HISTORY).content.decode()
    assert "<h1>Your decisions" in empty and NONE_YET in empty and "pending first" not in empty
    assert NONE_YET not in client.get(HISTORY + "&risk_class=low").content.decode()  # a narrower filter: no match
    approval_decide(request=asked[0], approver=approver, approve=False, reason="not on a Friday")
    listed = client.get(HISTORY).content.decode()
    assert asked[0].approval_id in listed and asked[1].approval_id not in listed and NONE_YET not in listed
    inbox = client.get(INBOX).content.decode()
    assert "<h1>Approval requests — pending first" in inbox and "Your decisions" not in inbox


def test_the_history_has_no_decide_column_while_the_inbox_keeps_it(
    client, approver, asked, member_token, mutating_tool
):
    # adminux32: "Your decisions" showed a "Decide" header over a column empty on every row (all decided).
    approval_decide(request=asked[0], approver=approver, approve=True, reason="")
    approval_decide(request=asked[1], approver=approver, approve=False, reason="not on a Friday")
    client.force_login(approver)
    history = client.get(HISTORY)
    assert "decide_link" not in history.context["cl"].list_display
    assert 'class="column-decide_link' not in history.content.decode()
    asked_again = approval_request_create(principal=member_token[2], tool=mutating_tool, arguments={"path": "/x"})
    inbox = client.get(INBOX).content.decode()
    assert 'class="column-decide_link' in inbox and f"{asked_again.pk}/decide/" in inbox
