"""What a staff admin page reads that cannot change within the request is read once (``request_memo``): the tenant
probe (a curator's home asked 9 times), the visibility version's row (an approver's inbox 5 times) and the tenants
of the people whose requests it judges (5 times), on every page an operator, an approver and a curator open; and
what waits for the approver (the inbox counted it 3 times, its "waiting for you" filter 4), which a decision in the
same request reads anew."""

from collections import Counter

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from governance.cache import request_memo_block
from governance.models import ApprovalRequest
from governance.principals import principal_for_user
from governance.roles import APPROVERS, CURATORS, OPERATORS
from governance.selectors import approval_requests_waiting_count, approval_requests_waiting_for
from governance.services.approvals import approval_decide, approval_request_create, approvals_expire
from tests.governance.factories import tenant_with

pytestmark = pytest.mark.django_db
READ_ONCE = {
    "the tenant probe": 'FROM "governance_tenant" LIMIT 1',
    "the visibility version": 'FROM "governance_visibilityversion"',
    "people's tenants": 'FROM "governance_tenant_members" INNER JOIN',
    "what waits for the approver": 'COUNT("governance_approvalrequest"."id") AS "n"',  # _usable_groups
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
        "waiting for you": reverse("admin:governance_approvalrequest_changelist") + "?waiting=you",
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
    assert {
        ("approver", "inbox"),
        ("approver", "waiting for you"),
        ("curator", "home"),
        ("operator", "servers"),
    } <= served
    assert repeated == {}


def test_a_decision_in_the_request_reads_what_waits_anew(approver, grant, server, mutating_tool, member):
    grant(member, server, "discover", "execute")
    grant(approver, server, "approve")
    asked = [
        approval_request_create(principal=principal_for_user(member), tool=mutating_tool, arguments={"n": n})
        for n in range(2)
    ]
    with request_memo_block():  # one request, as scoutsite.middleware.memo_per_request opens it
        assert approval_requests_waiting_count(user=approver) == 2
        approval_decide(request=asked[0], approver=approver, approve=True, reason="")
        assert approval_requests_waiting_count(user=approver) == len(approval_requests_waiting_for(user=approver)) == 1
        approval_request_create(principal=principal_for_user(member), tool=mutating_tool, arguments={"n": 2})
        assert approval_requests_waiting_count(user=approver) == 2
        approvals_expire(ApprovalRequest.objects.filter(pk=asked[1].pk), reason="timed_out")
        assert approval_requests_waiting_count(user=approver) == 1
