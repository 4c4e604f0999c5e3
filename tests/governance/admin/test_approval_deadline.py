"""The decide page says how long is left beside the absolute deadline ("expires in 12 minutes") and what happens when
it passes; the inbox row says it too. The page has no navigation sidebar, as the inbox has none (adminux34)."""

from datetime import timedelta
from html import unescape

import pytest
from django.urls import reverse
from django.utils import timezone

from governance.models import ApprovalRequest, RiskClass
from governance.services.approvals import approval_decide

pytestmark = pytest.mark.django_db


@pytest.fixture
def pending(pending_approval):
    return pending_approval


def _status(client, request) -> str:
    html = client.get(reverse("admin:governance_approvalrequest_decide", args=[request.pk])).content.decode()
    return unescape(
        " ".join(
            html.split('id="approval-outcome"', 1)[1].split('<div class="scout-panel" id="decide-call">')[0].split()
        )
    )


def test_a_pending_request_says_how_long_is_left_and_what_happens_at_expiry(client, approver, pending):
    ApprovalRequest.objects.filter(pk=pending.pk).update(expires_at=timezone.now() + timedelta(minutes=12, seconds=30))
    RiskClass.objects.filter(name=pending.risk_class).update(approval_ttl=timedelta(minutes=15))
    client.force_login(approver)
    status = _status(client, pending)
    assert '(<span id="approval-time-left">expires in 12 minutes</span>)' in status
    html = client.get(reverse("admin:governance_approvalrequest_decide", args=[pending.pk])).content.decode()
    assert 'id="nav-sidebar"' not in html  # the call and the buttons get the window's width
    assert (
        "Undecided by then, the request expires: the agent's call is refused as expired, and it must ask again, which "
        "opens a new request. Once approved, the agent may make this exact call once within 15 minutes; unused by "
        "then, the approval expires too." in status
    )
    inbox = client.get(reverse("admin:governance_approvalrequest_changelist")).content.decode()
    row = inbox.split('class="field-status_column"', 1)[1].split("</td>")[0]
    assert "(expires in 12\xa0minutes)</small>" in row  # "12" and "minutes" never on two lines


def test_an_approved_request_says_how_long_the_agent_has(client, approver, pending):
    RiskClass.objects.filter(name=pending.risk_class).update(approval_ttl=timedelta(minutes=10))
    approval_decide(request=pending, approver=approver, approve=True, reason="")
    client.force_login(approver)
    status = _status(client, pending)
    assert "the agent may make the call once, before" in status
    assert '(<span id="approval-time-left">expires in 9 minutes</span>)' in status  # 9 and some seconds left
    assert "Unused by then, the approval expires: the agent's call is refused and it must ask again." in status


def test_the_last_minute_is_not_shown_as_none_left_and_an_expired_request_has_no_countdown(client, approver, pending):
    client.force_login(approver)
    ApprovalRequest.objects.filter(pk=pending.pk).update(expires_at=timezone.now() + timedelta(seconds=50))
    assert "expires in less than a minute" in _status(client, pending)  # Django alone says "0 minutes"
    ApprovalRequest.objects.filter(pk=pending.pk).update(expires_at=timezone.now() - timedelta(minutes=5))
    status = _status(client, pending)
    assert "undecided, expired" in status
    assert "approval-time-left" not in status and "approval-expiry" not in status  # nothing left to count down


def test_the_home_row_and_the_approval_message_say_the_time_left(client, approver, pending):
    """The approver's home lists the waiting requests newest first: each says when it lapses, so the one about to
    expire is not taken for one with a day left. Approved, the message says until when the agent may make the call."""
    ApprovalRequest.objects.filter(pk=pending.pk).update(expires_at=timezone.now() + timedelta(minutes=7, seconds=30))
    RiskClass.objects.filter(name=pending.risk_class).update(approval_ttl=timedelta(minutes=20, seconds=30))
    client.force_login(approver)
    home = client.get(reverse("admin:index")).content.decode().split('id="approver-home"')[1].split("</section>")[0]
    assert '<small class="expires">expires in 7\xa0minutes</small>' in home
    response = client.post(
        reverse("admin:governance_approvalrequest_decide", args=[pending.pk]), {"_approve": "1"}, follow=True
    )
    [message] = [str(m) for m in response.context["messages"]]
    pending.refresh_from_db()
    until = f"{timezone.localtime(pending.expires_at):%Y-%m-%d %H:%M}, expires in 20\xa0minutes"
    assert f"the agent may now make this exact call once, before {until}." in message
