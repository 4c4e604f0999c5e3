"""What a staff admin page reads that cannot change within the request is read once (``request_memo``): the tenant
probe (a curator's home asked 9 times), the visibility version's row (an approver's inbox 5 times) and the tenants
of the people whose requests it judges (5 times), on every page an operator, an approver and a curator open."""

from collections import Counter

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from governance.principals import principal_for_user
from governance.roles import APPROVERS, CURATORS, OPERATORS
from governance.services.approvals import approval_request_create
from tests.governance.factories import tenant_with

pytestmark = pytest.mark.django_db
READ_ONCE = {
    "the tenant probe": 'FROM "governance_tenant" LIMIT 1',
    "the visibility version": 'FROM "governance_visibilityversion"',
    "people's tenants": 'FROM "governance_tenant_members" INNER JOIN',
}


def _reads(queries) -> Counter:
    return Counter(name for query in queries for name, text in READ_ONCE.items() if text in query["sql"])


def test_each_staff_page_reads_what_cannot_change_in_the_request_once(
    client, django_user_model, grant, server, mutating_tool, member
):
    acme = tenant_with("acme", member)  # tenants exist: the probe's answer shapes what a curator and an operator see
    grant(member, server, "discover", "execute")
    asked = approval_request_create(principal=principal_for_user(member), tool=mutating_tool, arguments={"n": 1})
    pages = {
        "home": reverse("admin:index"),
        "inbox": reverse("admin:governance_approvalrequest_changelist"),
        "decide": reverse("admin:governance_approvalrequest_decide", args=[asked.pk]),
        "tools": reverse("admin:catalog_tool_changelist"),
        "servers": reverse("admin:catalog_server_changelist"),
    }
    opened = {"operator": OPERATORS, "approver": APPROVERS, "curator": CURATORS}
    repeated, served = {}, set()
    for persona, group in opened.items():
        person = django_user_model.objects.create_user(username=persona, is_staff=True)
        person.groups.add(Group.objects.get(name=group))
        acme.members.add(person)
        grant(person, server, "approve")
        client.force_login(person)
        for page, url in pages.items():
            with CaptureQueriesContext(connection) as queries:
                if client.get(url).status_code == 200:
                    served.add((persona, page))
            repeated.update({(persona, page, name): n for name, n in _reads(queries).items() if n > 1})
    assert {("approver", "inbox"), ("approver", "decide"), ("curator", "home"), ("operator", "servers")} <= served
    assert repeated == {}
