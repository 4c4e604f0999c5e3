"""A shared server's tools are classified and reviewed only by someone who may act for every tenant (Z12).

Once an install has tenants, a shared tool's risk class decides every tenant's approvals, and accepting its held
definition change releases it to every tenant: tenant A's operator or curator must not do either (redteam2's rule,
as for curation). Their own tenant's tools stay theirs; a superuser still does both. The admin pages are read-only
and say why, the admin actions refuse with a message, and the services refuse whoever calls them."""

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from catalog.definitions import normalize_listing
from catalog.services.apply import catalog_apply_listing
from governance.choices import ReviewStatus
from governance.models import RiskClass, ServerTenant, ToolPolicy, ToolReview
from governance.roles import CURATORS, OPERATORS
from governance.services.policy import tool_policy_classify
from governance.services.review import tool_review_accept
from tests.governance.factories import ServerFactory, tenant_with

pytestmark = pytest.mark.django_db

CLEAN = {"name": "lookup", "description": "Looks a record up.", "annotations": {"readOnlyHint": True}}
CHANGED = {**CLEAN, "description": "Looks a record up, then deletes it."}


def _sync(server, tool: dict) -> None:
    definitions, rejections, names = normalize_listing([tool], max_bytes=100_000)
    assert rejections == []
    catalog_apply_listing(server=server, definitions=definitions, keep_names=names)


def _held(server) -> ToolReview:
    """``server``'s tool "lookup" accepted once, then changed upstream: held with a pending review."""
    _sync(server, CLEAN)
    _sync(server, CHANGED)
    return ToolReview.objects.get(tool__server=server, status=ReviewStatus.PENDING)


@pytest.fixture
def world(django_user_model):
    operator = django_user_model.objects.create_user(username="op-a", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    curator = django_user_model.objects.create_user(username="cur-a", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    tenant = tenant_with("tenant-a", operator, curator)
    shared = ServerFactory(slug="shared-srv")
    own = ServerFactory(slug="own-srv")
    ServerTenant.objects.create(server=own, tenant=tenant)
    return {"operator": operator, "curator": curator, "shared": _held(shared), "own": _held(own)}


def _classify(client, policy: ToolPolicy):
    return client.post(
        reverse("admin:governance_toolpolicy_change", args=[policy.pk]),
        {
            "operation_class": "read",
            "reversibility": "reversible",
            "risk_class": RiskClass.objects.get(name="low").pk,
            "allowed_environments": "[]",
            "data_classes": "[]",
        },
    )


def test_a_tenant_operator_does_not_classify_a_shared_tool(client, world):
    shared, own = world["shared"].tool.policy, world["own"].tool.policy
    client.force_login(world["operator"])
    page = client.get(reverse("admin:governance_toolpolicy_change", args=[shared.pk]))
    assert page.status_code == 200 and "only a superuser classifies it" in page.content.decode()
    assert 'name="risk_class"' not in page.content.decode()  # read-only
    assert _classify(client, shared).status_code == 403
    shared.refresh_from_db()
    assert not shared.classified_by_admin and shared.risk_class.name != "low"
    assert _classify(client, own).status_code == 302  # their own tenant's tool: theirs to classify
    own.refresh_from_db()
    assert own.classified_by_admin and own.risk_class.name == "low"


@pytest.mark.parametrize("role", ["operator", "curator"])
def test_a_tenant_admin_does_not_release_a_shared_tools_held_change(client, world, role):
    shared, own = world["shared"], world["own"]
    client.force_login(world[role])
    page = client.get(reverse("admin:governance_toolreview_change", args=[shared.pk]))
    assert page.status_code == 200 and 'name="_accept"' not in page.content.decode()
    assert "only a superuser accepts or rejects" in page.content.decode()
    decided = client.post(reverse("admin:governance_toolreview_change", args=[shared.pk]), {"_accept": "1"})
    assert decided.status_code == 403
    changelist = reverse("admin:governance_toolreview_changelist")
    client.post(changelist, {"action": "accept_selected", "_selected_action": [shared.pk, own.pk]})
    shared.refresh_from_db()
    own.refresh_from_db()
    assert shared.status == ReviewStatus.PENDING and shared.tool.policy.held
    assert own.status == ReviewStatus.ACCEPTED  # their own tenant's tool: theirs to release


def test_the_services_refuse_a_tenant_admin_and_serve_a_superuser(world, superuser):
    review = world["shared"]
    policy = review.tool.policy
    low = RiskClass.objects.get(name="low")
    classification = {
        "operation_class": "read",
        "reversibility": "reversible",
        "risk_class": low,
        "allowed_environments": [],
        "data_classes": [],
    }
    with pytest.raises(PermissionDenied):
        tool_policy_classify(policy=policy, actor=world["operator"], **classification)
    with pytest.raises(PermissionDenied):
        tool_review_accept(review=review, actor=world["curator"])
    tool_policy_classify(policy=policy, actor=superuser, **classification)
    tool_review_accept(review=review, actor=superuser)
    policy.refresh_from_db()
    assert policy.risk_class == low and not policy.held
