"""Every role's home lists that person's own recent actions from Scout's records, where Django's "Recent actions"
read only the admin's history and said "None available" to an approver who had decided twenty requests, and to a
curator after a morning in the workbench (adminux29)."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.roles import APPROVERS, CURATORS, OPERATORS
from governance.services.approvals import approval_decide, approval_request_create
from search.models import DismissedRequest
from tests.catalog.servers.fixtures import good_tool

pytestmark = pytest.mark.django_db


def _staff(django_user_model, username: str, role: str):
    user = django_user_model.objects.create_user(username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return user


def _recent(client) -> str:
    html = client.get(reverse("admin:index")).content.decode()
    assert "None available" not in html  # Django's panel, which nothing Scout does ever filled
    return html.split('id="recent-actions-module"', 1)[1].split("</div>", 1)[0]


def test_an_approvers_decision_is_listed_and_leads_to_their_decisions(
    client, django_user_model, grant, server, mutating_tool, member_token
):
    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    approver = _staff(django_user_model, "appr", APPROVERS)
    grant(Group.objects.get(name=APPROVERS), server, "approve")
    client.force_login(approver)
    assert 'id="recent-actions-none"' in _recent(client)

    request = approval_request_create(principal=principal, tool=mutating_tool, arguments={"name": "x"})
    approval_decide(request=request, approver=approver, approve=True, reason="fine")
    panel = _recent(client)
    # It reads as what the approver did (adminux33: it read "Approval approved <tool>"), with whose call it was.
    assert "Approval approved" not in panel
    assert "Approved:" in panel and f"{mutating_tool.tool_id} for {principal.user.get_username()}" in panel
    # The approver reads no audit trail: their decisions are in the inbox, under "decided by me".
    assert f'href="{reverse("admin:governance_approvalrequest_changelist")}?decided=me"' in panel
    assert "Approval requested" not in panel  # the requester's agent's doing, not the approver's


def test_a_curators_workbench_attach_and_dismissal_are_listed(client, django_user_model, tool):
    curator = _staff(django_user_model, "cur", CURATORS)
    client.force_login(curator)
    workbench = reverse("search_workbench")
    response = client.post(workbench, {"text": "pack the notes", "tool_id": tool.tool_id, "kind": "example"})
    assert response.status_code == 302 and tool.examples.filter(text="pack the notes").exists()
    client.post(workbench, {"action": "dismiss", "text": "book a flight"})
    assert DismissedRequest.objects.filter(dismissed_by=curator).exists()

    panel = _recent(client)
    assert "Added example request “pack the notes” from the workbench" in panel
    assert f'href="{reverse("admin:catalog_tool_change", args=[tool.pk])}"' in panel
    assert "Dismissed from the workbench" in panel and "book a flight" in panel
    # Newest first: the dismissal came after the attach.
    assert panel.index("book a flight") < panel.index("pack the notes")


def test_another_persons_actions_are_not_listed(client, django_user_model, tool):
    other = _staff(django_user_model, "cur-b", CURATORS)
    client.force_login(other)
    client.post(reverse("search_workbench"), {"text": "pack the notes", "tool_id": tool.tool_id, "kind": "example"})
    client.force_login(_staff(django_user_model, "cur-a", CURATORS))
    panel = _recent(client)
    assert "pack the notes" not in panel and 'id="recent-actions-none"' in panel


def test_a_learned_request_promoted_on_its_page_is_listed_once(client, django_user_model, tool):
    from search.models import LearnedRequest

    learned = LearnedRequest.objects.create(tool=tool, text="what is new in the repo", key="k1", principal_count=1)
    client.force_login(_staff(django_user_model, "cur", CURATORS))
    client.post(reverse("admin:search_learnedrequest_change", args=[learned.pk]), {"_promote": "1"})
    panel = _recent(client)
    assert "Promoted learned request “what is new in the repo” to an example" in panel
    # The page saves no field: Django's "No fields changed." about the learned request was a second, empty row.
    assert "No fields changed" not in panel and panel.count("<li>") == 1


def test_a_token_made_for_someone_names_the_token(client, django_user_model, member):
    from datetime import timedelta

    from django.utils import timezone

    from governance.services.tokens import api_token_create

    admin = django_user_model.objects.create_superuser(username="root", password="x")
    token, _ = api_token_create(
        user=member, name="ci", scopes=["discover"], expires_at=timezone.now() + timedelta(days=1), created_by=admin
    )
    client.force_login(admin)
    panel = _recent(client)
    assert "API token created" in panel and f">{token.ref}</a>" in panel  # its event on the trail, by the token's id


def test_the_syncs_an_operator_started_are_listed_with_their_outcome(client, django_user_model, scripted):
    """opsux11: "Sync now", "Retry sync" and a new server's first sync were nowhere in the operator's recent actions
    (no audit event, no admin history): each run they asked for is listed with how it ended, linked to the run."""
    from catalog.models import Server, SyncRun

    good, _ = scripted({"pages": [[good_tool("alpha")]]}, slug="good")
    broken, _ = scripted({"pages": [[good_tool("beta")]]}, slug="broken")
    Server.objects.filter(pk=broken.pk).update(command="/bin/false", args=[])
    operator = _staff(django_user_model, "ops", OPERATORS)
    other = _staff(django_user_model, "ops-b", OPERATORS)
    client.force_login(other)
    client.post(reverse("admin:catalog_server_changelist"), {"action": "sync_now", "_selected_action": [good.pk]})
    client.force_login(operator)
    assert 'id="recent-actions-none"' in _recent(client)  # another operator's sync is not theirs

    client.post(reverse("admin:catalog_server_changelist"), {"action": "sync_now", "_selected_action": [good.pk]})
    client.post(reverse("admin:catalog_server_sync", args=[broken.pk]))
    panel = _recent(client)
    succeeded, failed = (SyncRun.objects.filter(server=server, started_by=operator).get() for server in (good, broken))
    assert f'Sync: succeeded</span><br>\n        <a href="{_run_url(succeeded)}">good</a>' in panel
    assert f'Sync: failed</span><br>\n        <a href="{_run_url(failed)}">broken</a>' in panel
    assert panel.index(">broken<") < panel.index(">good<")  # newest first
    assert "/bin/false" not in panel  # the error stays on the run's page


def _run_url(run) -> str:
    return reverse("admin:catalog_syncrun_change", args=[run.pk])
