"""Who may decide each of many waiting requests, read at once (the waiting-approvals page): grants on the tool or its
server, direct or through a group; never the requester, nor an inactive person, nor anyone outside the request's
tenant or its server's."""

import pytest
from django.contrib.auth.models import Group

from governance.models import ServerTenant
from governance.principals import principal_for_user
from governance.services.approvals import approval_request_create
from governance.services.notifications import approvers_for, approvers_for_many
from governance.services.permissions import permission_grant
from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

pytestmark = pytest.mark.django_db


def test_each_request_gets_its_own_deciders(django_user_model, superuser):
    people = {name: django_user_model.objects.create_user(username=name) for name in ("alice", "bob", "carol", "dave")}
    people["erin"] = django_user_model.objects.create_user(username="erin", is_active=False)
    asker, tenant_asker = (django_user_model.objects.create_user(username=name) for name in ("asker", "t-asker"))
    shared = ServerFactory(slug="shared")
    one, two = (ToolFactory(server=shared, name=name, annotations=None) for name in ("one", "two"))
    owned = ServerFactory(slug="owned")
    tenant = tenant_with("tenant-a", tenant_asker, people["dave"])
    ServerTenant.objects.create(server=owned, tenant=tenant)
    three = ToolFactory(server=owned, name="three", annotations=None)
    on_shared, on_three = Group.objects.create(name="shared approvers"), Group.objects.create(name="three approvers")
    on_shared.user_set.add(people["bob"], asker)
    on_three.user_set.add(people["dave"], people["carol"])  # carol is in no tenant: not tenant-a's to decide
    for target, holder in ((one, people["alice"]), (shared, on_shared), (shared, people["erin"]), (three, on_three)):
        permission_grant(actor=superuser, target=target, action="approve", holder=holder)

    def ask(user, tool):
        return approval_request_create(principal=principal_for_user(user), tool=tool, arguments={"tool": tool.name})

    requests = [ask(asker, one), ask(asker, two), ask(tenant_asker, three), ask(people["alice"], one)]
    requests.append(ask(tenant_asker, two))  # a shared tool asked in tenant-a: tenant-a's people only
    found = approvers_for_many(requests=requests)
    names = [[user.username for user in found[request.pk]] for request in requests]
    assert names == [["alice", "bob"], ["bob"], ["dave"], ["bob", "asker"], []]
    assert all(approvers_for(request=request) == found[request.pk] for request in requests)
