"""A token's page leads to what it did: its events in the audit trail (for who may read the trail)."""

import pytest
from django.contrib.auth.models import Permission
from django.urls import reverse

from governance.services.audit import audit_record

pytestmark = pytest.mark.django_db


def test_the_token_page_links_its_events_in_the_audit_trail(client, superuser, member_token, tool):
    token, _, principal = member_token
    audit_record(event_type="execution", principal=principal, tool=tool, outcome="success")
    audit_record(event_type="execution", principal=None, tool=tool, outcome="success")  # not this token's
    client.force_login(superuser)
    page = client.get(reverse("admin:governance_apitoken_change", args=[token.pk]))
    url = page.context["audit_trail_url"]
    assert f'id="token-activity" href="{url.replace("&", "&amp;")}"' in page.content.decode()
    events = client.get(url).context["cl"].result_list
    assert [event.token_ref for event in events] == [token.ref]


def test_no_link_for_who_may_not_read_the_audit_trail(client, django_user_model, member_token):
    token, _, _ = member_token
    staff = django_user_model.objects.create_user(username="tok-admin", is_staff=True, is_superuser=False)
    staff.user_permissions.add(Permission.objects.get(codename="view_apitoken"))
    client.force_login(staff)
    page = client.get(reverse("admin:governance_apitoken_change", args=[token.pk]))
    assert page.status_code == 200
    assert "audit_trail_url" not in page.context and 'id="token-activity"' not in page.content.decode()


def test_a_token_is_revoked_from_its_own_page_after_the_confirmation(client, superuser, member_token):
    """The page an approval or the audit trail leads to revokes the token (the list's action and its confirmation
    page); it offers no Save button, as every field of a saved token is read-only."""
    token, _, _ = member_token
    client.force_login(superuser)
    page = client.get(reverse("admin:governance_apitoken_change", args=[token.pk])).content.decode()
    assert 'id="token-revoke"' in page and 'name="_save"' not in page and 'name="_continue"' not in page
    changelist = reverse("admin:governance_apitoken_changelist")
    form = {"action": "revoke_selected", "_selected_action": str(token.pk)}
    confirm = client.post(changelist, form)
    assert "Revoke these tokens?" in confirm.content.decode()
    token.refresh_from_db()
    assert token.revoked_at is None  # not before the confirmation
    client.post(changelist, {**form, "confirm": "yes"})
    token.refresh_from_db()
    assert token.revoked_at is not None
    page = client.get(reverse("admin:governance_apitoken_change", args=[token.pk])).content.decode()
    assert 'id="token-revoke"' not in page  # nothing left to revoke
