"""Z12 on the Weaviate backend: a tenant's search reaches Weaviate with the tenant filter inside the query.

No Weaviate server can run here, so the real weaviate client builds the gRPC request and a recorder stands
in for the network (as in test_weaviate.py). The search goes through the one entry point every client uses
(``search_for_principal``), from a real token acting in tenant A."""

from types import SimpleNamespace

import pytest
from django.contrib.auth.models import Group
from weaviate.proto.v1 import base_pb2
from weaviate.util import _ServerVersion

from catalog.models import Tool
from governance.models import ServerTenant
from governance.selectors import tool_pks_visible_to
from governance.services.permissions import permission_grant
from governance.services.tokens import api_token_create, api_token_verify
from search.backends.weaviate import WeaviateBackend
from search.services import search_for_principal
from tests.governance.factories import ServerFactory, ToolFactory, in_days, tenant_with

pytestmark = pytest.mark.django_db


@pytest.fixture
def recorded(monkeypatch):
    """The gRPC search requests the Weaviate backend would send, with its index reported ready."""
    import weaviate
    from weaviate.connect.base import ConnectionParams

    client = weaviate.WeaviateClient(
        connection_params=ConnectionParams.from_params(
            http_host="127.0.0.1", http_port=1, http_secure=False, grpc_host="127.0.0.1", grpc_port=2, grpc_secure=False
        ),
        skip_init_checks=True,
    )
    client._connection._weaviate_version = _ServerVersion(1, 32, 0)
    sent = []

    def record(request, *args, **kwargs):
        sent.append(request)
        raise ConnectionError("recorded, not sent")

    client._connection.grpc_search = record
    backend = WeaviateBackend()
    backend._client = client
    monkeypatch.setattr(backend, "status", lambda: SimpleNamespace(ready=True))
    monkeypatch.setattr(backend, "_fallback", lambda: SimpleNamespace(search=lambda request: _empty(backend)))
    monkeypatch.setattr("search.services.backend_get", lambda: backend)
    monkeypatch.setattr("search.services._encode_query", lambda cleaned, parts: (None, [None] * len(parts)))
    yield sent
    client.close()


def _empty(backend):
    from search.backends import SearchResult

    return SearchResult([], index_ready=True, backend=backend.name)


def test_the_tenant_filter_is_inside_the_weaviate_query(member, outsider, superuser, recorded):
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

    search_for_principal(principal=principal, query="send an email message")

    assert len(recorded) == 1
    request = recorded[0]
    assert request.filters.target.property == "tool_pk"
    assert request.filters.operator == base_pb2.Filters.OPERATOR_CONTAINS_ANY
    in_query = set(request.filters.value_int_array.values)
    expected = set(Tool.objects.filter(server__slug__in=["shared", "a-srv"]).values_list("pk", flat=True))
    assert in_query == expected == set(tool_pks_visible_to(principal=principal))
    assert not in_query & set(Tool.objects.filter(server__slug="b-srv").values_list("pk", flat=True))
