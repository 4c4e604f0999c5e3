"""Tool policy: 'Required entitlements' says how to get one that is not listed. Entitlements serve every tenant
(their holders span tenants, like risk classes): a superuser adds one from the policy page with "+", while an
operator, who may only read them, is told to ask a superuser and where to read who holds each."""

import pytest
from django.urls import reverse

from governance.models import Entitlement
from tests.governance.admin.test_tool_policy_note import operator, policy  # noqa: F401 - shared fixtures

pytestmark = pytest.mark.django_db

ADD_LINK = 'id="add_id_required_entitlements"'


def test_an_operator_is_told_to_ask_a_superuser(client, operator, policy):  # noqa: F811
    client.force_login(operator)
    page = client.get(reverse("admin:governance_toolpolicy_change", args=[policy.pk])).content.decode()
    assert "a superuser adds them, so ask one for a new one" in page
    assert ADD_LINK not in page  # Django's "+" would open a page that refuses them
    entitlements = reverse("admin:governance_entitlement_changelist")
    assert f'<a href="{entitlements}">Entitlements</a> lists who holds each' in page
    assert client.get(entitlements).status_code == 200


def test_a_superuser_adds_one_from_the_policy_page(client, superuser, policy):  # noqa: F811
    client.force_login(superuser)
    page = client.get(reverse("admin:governance_toolpolicy_change", args=[policy.pk])).content.decode()
    assert ADD_LINK in page and "A new one: + beside the list" in page
    popup = reverse("admin:governance_entitlement_add") + "?_to_field=id&_popup=1"
    response = client.post(popup, {"slug": "payroll", "name": "Payroll", "_popup": "1", "_to_field": "id"})
    assert response.status_code == 200 and "django-admin-popup-response" in response.content.decode()
    assert Entitlement.objects.filter(slug="payroll").exists()
