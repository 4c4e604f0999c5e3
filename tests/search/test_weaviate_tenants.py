"""Z12 on the Weaviate backend: a tenant's search reaches Weaviate with the tenant filter inside the query.

Weaviate serves the dense leg only, with the caller's visible ids as a filter inside the query; the tenant
rule is part of that visible set. The real weaviate client talks to the in-process fake server
(``fake_weaviate``), and the search goes through the one entry point every client uses
(``search_for_principal``), from a real token acting in tenant A."""

import pytest
from django.contrib.auth.models import Group
from weaviate.proto.v1 import base_pb2

from catalog.models import Tool
from governance.models import ServerTenant
from governance.selectors import tool_pks_visible_to
from governance.services.permissions import permission_grant
from governance.services.tokens import api_token_create, api_token_verify
from search.services import index_rebuild, search_for_principal
from tests.governance.factories import ServerFactory, ToolFactory, in_days, tenant_with

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def test_the_tenant_filter_is_inside_the_weaviate_query(
    member, outsider, superuser, fake, weaviate_backend, encoder, reindex
):
    tenant_a, tenant_b = tenant_with("a", member), tenant_with("b", outsider)
    everyone = Group.objects.create(name="everyone")
    everyone.user_set.add(member, outsider)
    for slug, tenant in (("shared", None), ("a-srv", tenant_a), ("b-srv", tenant_b)):
        server = ServerFactory(slug=slug)
        if tenant is not None:
            ServerTenant.objects.create(server=server, tenant=tenant)
        ToolFactory(server=server, name="send_email", description="Send an email message.")
        permission_grant(actor=superuser, target=server, action="discover", holder=everyone)
    _, raw = api_token_create(user=member, name="t", tenant=tenant_a, scopes=["discover"], expires_at=in_days(1))
    principal = api_token_verify(raw)
    tenant_b_tools = set(Tool.objects.filter(server__slug="b-srv").values_list("pk", flat=True))

    reindex(index_rebuild)
    assert weaviate_backend.wait_connected(30)
    stored = {o["properties"]["tool_pk"] for o in fake.objects("ScoutTools").values()}
    assert tenant_b_tools <= stored  # B's tool is in the collection: only the filter keeps it out
    fake.requests = []
    result = search_for_principal(principal=principal, query="send an email message")

    assert result.backend == "weaviate" and not result.degraded
    dense = [r for r in fake.requests if r.HasField("near_vector")]
    assert len(dense) == 1
    request = dense[0]
    assert request.filters.target.property == "tool_pk"
    assert request.filters.operator == base_pb2.Filters.OPERATOR_CONTAINS_ANY
    in_query = set(request.filters.value_int_array.values)
    expected = set(Tool.objects.filter(server__slug__in=["shared", "a-srv"]).values_list("pk", flat=True))
    assert in_query == expected == set(tool_pks_visible_to(principal=principal))
    assert not in_query & tenant_b_tools
    assert result.matches and not {m.tool_pk for m in result.matches} & tenant_b_tools
