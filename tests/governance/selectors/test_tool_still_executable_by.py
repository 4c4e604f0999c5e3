"""tool_still_executable_by: a call that waited before it was sent is decided again, in governance, from the database
as it stands now (Z6): its token still acts and the tool, unchanged, is still one it may execute."""

import pytest

from governance.selectors import tool_still_executable_by
from governance.services.permissions import permission_revoke
from governance.services.tokens import api_token_revoke

pytestmark = pytest.mark.django_db


def _still(principal, tool) -> bool:
    return tool_still_executable_by(principal=principal, tool_pk=tool.pk, definition_hash=tool.definition_hash)


def test_allows_a_token_that_may_still_execute_the_unchanged_tool(member_token, tool, grant):
    token, _, principal = member_token
    grant(token.user, tool.server)

    assert _still(principal, tool)


def test_refuses_once_the_token_is_revoked(member_token, tool, grant):
    token, _, principal = member_token
    grant(token.user, tool.server)
    api_token_revoke(token=token)

    assert not _still(principal, tool)


def test_refuses_once_execute_is_revoked_or_the_tool_changed(member_token, tool, grant, superuser):
    token, _, principal = member_token
    grant(token.user, tool.server)

    assert not tool_still_executable_by(principal=principal, tool_pk=tool.pk, definition_hash="another definition")
    permission_revoke(actor=superuser, target=tool.server, action="execute", holder=token.user)
    assert not _still(principal, tool)
