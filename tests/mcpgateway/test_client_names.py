"""Directly listed tools are named ``server__tool``, and ``tools/call`` routes such a name to the visible tool
that carries it. Slugs and tool names may both hold ``__``: server "data" with a tool "lake__query" (an upstream
names its own tools) is "data__lake__query", as is server "data__lake"'s "query"."""

from __future__ import annotations

import pytest

from governance.principals import principal_for_user
from governance.services.permissions import permission_grant
from mcpgateway.selectors import client_tool_name, tool_for_client_name, tools_listed_for
from tests.governance.factories import ServerFactory, ToolFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def shadowed(superuser, member):
    lake = ToolFactory(server=ServerFactory(slug="data__lake"), name="query")
    shadow = ToolFactory(server=ServerFactory(slug="data"), name="lake__query")
    alone = ToolFactory(server=ServerFactory(slug="files"), name="read")
    for tool in (lake, shadow, alone):
        for action in ("discover", "execute"):
            permission_grant(actor=superuser, target=tool, action=action, holder=member)
    return lake, shadow, alone


def test_a_name_two_visible_tools_share_routes_to_neither(shadowed, member):
    """Routed to the first by tool id, "data::lake__query" took the calls a client made to server data__lake's
    "query" (its arguments went to another upstream: shadowing, T8). A shared name is refused like an unknown one;
    both tools stay reachable by tool_id (execute_tool)."""
    lake, shadow, alone = shadowed
    principal = principal_for_user(member)
    name = client_tool_name(server_slug="data__lake", tool_name="query")
    assert name == client_tool_name(server_slug="data", tool_name="lake__query")  # the ambiguity itself

    assert tool_for_client_name(principal=principal, name=name) is None
    assert tool_for_client_name(principal=principal, name="files__read") == alone
    listed = [tool.tool_id for tool in tools_listed_for(principal=principal)]
    assert listed == ["files::read"]  # neither is listed under a name that would be refused


def test_a_name_only_one_visible_tool_has_still_routes(shadowed, member, superuser):
    from governance.services.permissions import permission_revoke

    lake, shadow, _ = shadowed
    for action in ("discover", "execute"):
        permission_revoke(actor=superuser, target=shadow, action=action, holder=member)
    principal = principal_for_user(member)
    assert tool_for_client_name(principal=principal, name="data__lake__query") == lake
