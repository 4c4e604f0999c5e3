"""The audit trail's rows for grants and revocations say what was given to whom ("gave alice execute on mail"), as
the reader may read the payload: another tenant's person is someone in another tenant (``audit_payload_shown``)."""

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from governance.roles import OPERATORS
from governance.services.permissions import permission_grant, permission_revoke
from tests.governance.factories import GroupFactory, ServerFactory, ToolFactory, tenant_with

pytestmark = pytest.mark.django_db


def _trail(client) -> str:
    return client.get(reverse("admin:governance_auditevent_changelist")).content.decode()


def test_audit_rows_say_what_was_granted_to_whom(client, superuser, django_user_model):
    server = ServerFactory(slug="mail")
    alice = django_user_model.objects.create_user(username="alice")
    permission_grant(actor=superuser, target=server, action="execute", holder=alice)
    permission_grant(actor=superuser, target=server, action="execute", holder=alice)  # again: nothing new
    permission_grant(actor=superuser, target=server, action="discover", holder=GroupFactory(name="ops"))
    permission_revoke(actor=superuser, target=server, action="execute", holder=alice)
    client.force_login(superuser)
    html = _trail(client)
    mail = f'<a href="{reverse("admin:catalog_server_change", args=[server.pk])}">mail</a>'
    for text in (
        f"gave alice execute on {mail}",
        f"alice already had execute on {mail}",
        f"gave group ops discover on {mail}",
        f"took execute on {mail} from alice",
    ):
        assert f'<small class="grant-change">{text}</small>' in html, text


def test_a_tool_grant_links_the_tool_while_it_exists(client, superuser, django_user_model):
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="send")
    alice = django_user_model.objects.create_user(username="alice")
    permission_grant(actor=superuser, target=tool, action="execute", holder=alice)
    client.force_login(superuser)
    link = f'<a href="{reverse("admin:catalog_tool_change", args=[tool.pk])}">mail::send</a>'
    assert f'<small class="grant-change">gave alice execute on {link}</small>' in _trail(client)
    tool.delete()
    assert '<small class="grant-change">gave alice execute on mail::send</small>' in _trail(client)


def test_another_tenants_holder_is_not_named(client, superuser, django_user_model):
    operator = django_user_model.objects.create_user(username="op-a", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    tenant_with("tenant-a", operator)
    bob = django_user_model.objects.create_user(username="bob-of-b")
    tenant_with("tenant-b", bob)
    permission_grant(actor=superuser, target=ServerFactory(slug="shared"), action="execute", holder=bob)
    client.force_login(operator)
    html = _trail(client)
    assert '<small class="grant-change">gave someone in another tenant execute on <a href=' in html
    assert "bob-of-b" not in html


def _grant_rows(superuser, holder, count: int, prefix: str) -> None:
    """``count`` grant rows, half on servers and half on tools, each on its own server or tool."""
    for n in range(count // 2):
        server = ServerFactory(slug=f"{prefix}{n}")
        permission_grant(actor=superuser, target=server, action="execute", holder=holder)
        permission_grant(actor=superuser, target=ToolFactory(server=server), action="execute", holder=holder)


def _trail_queries(client, rows: int) -> int:
    with CaptureQueriesContext(connection) as queries:
        html = _trail(client)
    assert html.count('<small class="grant-change">gave alice execute on <a href="') == rows  # each one linked
    return len(queries)


@pytest.mark.parametrize("reader", ["superuser", "operator"])
def test_the_trail_costs_the_same_queries_for_2_or_20_grant_rows(reader, client, superuser, django_user_model):
    alice = django_user_model.objects.create_user(username="alice")
    if reader == "operator":
        operator = django_user_model.objects.create_user(username="op", is_staff=True)
        operator.groups.add(Group.objects.get(name=OPERATORS))
    client.force_login(superuser if reader == "superuser" else operator)
    _grant_rows(superuser, alice, 2, prefix="few")
    _trail(client)  # the first page fills the content-type and permission caches
    few = _trail_queries(client, rows=2)
    _grant_rows(superuser, alice, 18, prefix="more")
    assert _trail_queries(client, rows=20) == few
