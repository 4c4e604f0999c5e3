"""Visibility: without permission, with permission, with a narrower permission (NetBox style)."""

import pytest
from django.contrib.auth.models import Permission

from catalog.choices import ServerStatus
from governance.models import ToolPolicy
from governance.principals import Principal
from governance.selectors import (
    ToolNotFound,
    servers_not_serving_for,
    tool_get_for_principal,
    tool_pks_visible_to,
    tools_visible_to,
)
from governance.services.permissions import permission_revoke
from tests.governance.conftest import as_principal
from tests.governance.factories import EntitlementFactory, GroupFactory, ServerFactory, ToolFactory

pytestmark = pytest.mark.django_db


def visible(user, **kwargs) -> set[str]:
    pks = tool_pks_visible_to(principal=as_principal(user), **kwargs)
    from catalog.models import Tool

    return set(Tool.objects.filter(pk__in=pks).values_list("tool_id", flat=True))


def test_outsider_without_grant_sees_nothing(outsider, tool):
    assert visible(outsider) == set()
    with pytest.raises(ToolNotFound):
        tool_get_for_principal(principal=as_principal(outsider), tool_id=tool.tool_id)


def test_user_server_grant_shows_every_tool_of_that_server_only(member, grant, server, tool):
    other = ToolFactory(server=server, name="get_issue")
    foreign = ToolFactory(server=ServerFactory(slug="jira"), name="list_tickets")
    grant(member, server, "discover")
    assert visible(member) == {tool.tool_id, other.tool_id}
    assert foreign.tool_id not in visible(member)


def test_tool_grant_is_narrower_than_server_grant(member, grant, server, tool):
    ToolFactory(server=server, name="get_issue")
    grant(member, tool, "discover")
    assert visible(member) == {tool.tool_id}


def test_group_grant_applies_to_members_of_the_group_only(member, outsider, grant, server, tool):
    team = GroupFactory(name="developers")
    member.groups.add(team)
    grant(team, server, "discover")
    assert visible(member) == {tool.tool_id}
    assert visible(outsider) == set()


def test_group_tool_grant(member, grant, server, tool):
    team = GroupFactory(name="ops")
    member.groups.add(team)
    ToolFactory(server=server, name="other")
    grant(team, tool, "discover")
    assert visible(member) == {tool.tool_id}


def test_leaving_the_group_hides_on_next_call(member, grant, server, tool):
    team = GroupFactory(name="developers")
    member.groups.add(team)
    grant(team, server, "discover")
    assert visible(member) == {tool.tool_id}
    member.groups.remove(team)
    assert visible(member) == set()


def test_revocation_takes_effect_on_the_next_call(member, superuser, grant, server, tool):
    grant(member, server, "discover", "execute")
    principal = as_principal(member)
    assert tool_get_for_principal(principal=principal, tool_id=tool.tool_id, permission="execute") == tool
    permission_revoke(actor=superuser, target=server, action="execute", holder=member)
    with pytest.raises(ToolNotFound):
        tool_get_for_principal(principal=principal, tool_id=tool.tool_id, permission="execute")
    assert tool_get_for_principal(principal=principal, tool_id=tool.tool_id) == tool  # discover kept
    permission_revoke(actor=superuser, target=server, action="discover", holder=member)
    assert tool_pks_visible_to(principal=principal) == frozenset()


def test_execute_needs_an_execute_grant_and_discover(member, grant, server, tool):
    principal = as_principal(member)
    grant(member, server, "discover")
    with pytest.raises(ToolNotFound):
        tool_get_for_principal(principal=principal, tool_id=tool.tool_id, permission="execute")
    grant(member, tool, "execute")
    assert tool_get_for_principal(principal=principal, tool_id=tool.tool_id, permission="execute") == tool


def test_execute_grant_without_discover_shows_nothing(member, grant, server, tool):
    grant(member, server, "execute")
    assert tool_pks_visible_to(principal=as_principal(member), permission="execute") == frozenset()


def _hold(tool) -> None:
    policy = ToolPolicy.objects.get(tool=tool)
    policy.held = True
    policy.save()


@pytest.mark.parametrize(
    "hide",
    [
        pytest.param(lambda t: setattr(t, "enabled", False) or t.save(), id="disabled"),
        pytest.param(
            lambda t: t.server.__setattr__("status", ServerStatus.DISABLED) or t.server.save(), id="server-off"
        ),
        pytest.param(
            lambda t: t.server.__setattr__("status", ServerStatus.UNAVAILABLE) or t.server.save(), id="server-down"
        ),
        pytest.param(_hold, id="held"),
        pytest.param(lambda t: setattr(t, "removed_at", t.first_seen_at) or t.save(), id="removed"),
    ],
)
def test_hidden_states_leave_the_visible_set(member, grant, server, tool, hide):
    grant(member, server, "discover", "execute")
    assert tool.tool_id in visible(member)
    hide(tool)
    assert tool.tool_id not in visible(member)
    assert tool.tool_id not in visible(member, permission="execute")
    with pytest.raises(ToolNotFound):
        tool_get_for_principal(principal=as_principal(member), tool_id=tool.tool_id)


def _sync_fails(tool) -> None:
    """A failed sync marks the server unavailable with QuerySet.update(), which sends no model signal."""
    from catalog.models import Server
    from catalog.services.sync import server_sync

    Server.objects.filter(pk=tool.server_id).update(transport="stdio", command="/nonexistent/scout-upstream")
    assert server_sync(server_pk=tool.server_id, trigger="test").status == "failed"


@pytest.mark.parametrize(
    "hide",
    [
        pytest.param(_sync_fails, id="server-failed-sync"),
        pytest.param(lambda t: ToolPolicy.objects.filter(tool=t).delete(), id="policy-deleted"),
    ],
)
def test_bulk_writes_also_reach_every_cached_visible_set(member, grant, server, tool, hide):
    grant(member, server, "discover", "execute")
    assert tool.tool_id in visible(member)  # cached
    hide(tool)
    assert visible(member) == set()
    assert visible(member, permission="execute") == set()


def test_servers_not_serving_are_read_once_per_version_and_follow_every_status_write(member, grant, server, tool):
    """A search without a clear fit asks which of the caller's servers are not serving (discovery.not_serving_note),
    on every such answer: the list is kept per principal under the visibility version (perf14: the query reads every
    tool the caller may see, ~5 ms a search at 10k tools on SQLite). A status write, by a failed sync's update or by
    a save, is in the next answer; a server whose tools the caller may not see is never named."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    grant(member, server, "discover")
    hidden = ToolFactory(server=ServerFactory(slug="payroll"), name="rotate_keys")
    principal = as_principal(member)
    assert servers_not_serving_for(principal=principal, limit=6) == []
    with CaptureQueriesContext(connection) as queries:
        assert servers_not_serving_for(principal=principal, limit=6) == []
    assert [q["sql"] for q in queries if "catalog_tool" in q["sql"]] == []
    _sync_fails(tool)
    server.refresh_from_db()
    assert server.status in (ServerStatus.DEGRADED, ServerStatus.UNAVAILABLE)
    assert servers_not_serving_for(principal=principal, limit=6) == [(server.slug, server.status)]
    server.status = ServerStatus.DISABLED
    server.save()
    hidden.server.status = ServerStatus.UNAVAILABLE
    hidden.server.save()
    assert servers_not_serving_for(principal=principal, limit=6) == [(server.slug, ServerStatus.DISABLED)]


def test_model_level_permission_does_not_expose_every_object(member, tool):
    for codename in ("discover_tool", "execute_tool", "discover_server", "execute_server"):
        member.user_permissions.add(Permission.objects.get(codename=codename))
    assert visible(member) == set()
    assert visible(member, permission="execute") == set()


def test_superuser_gets_no_implicit_grants_through_the_selector(superuser, grant, server, tool):
    assert visible(superuser) == set()
    grant(superuser, tool, "discover")
    assert visible(superuser) == {tool.tool_id}


def test_inactive_user_sees_nothing(member, grant, server, tool):
    grant(member, server, "discover")
    member.is_active = False
    member.save()
    assert visible(member) == set()


def test_recreated_tool_does_not_inherit_old_grants(member, grant, server):
    old = ToolFactory(server=server, name="drop_table")
    grant(member, old, "discover")
    old.delete()
    new = ToolFactory(server=server, name="drop_table")
    assert visible(member) == set()
    with pytest.raises(ToolNotFound):
        tool_get_for_principal(principal=as_principal(member), tool_id=new.tool_id)


def test_required_entitlement_hides_tool_until_held(member, grant, server, tool):
    grant(member, server, "discover")
    entitlement = EntitlementFactory(slug="payments")
    tool.policy.required_entitlements.add(entitlement)
    assert visible(member) == set()
    team = GroupFactory(name="finance")
    entitlement.groups.add(team)
    member.groups.add(team)
    assert visible(member) == {tool.tool_id}


def test_token_scopes_narrow_rights(member, grant, server, tool):
    other_server = ServerFactory(slug="jira")
    other = ToolFactory(server=other_server, name="list_tickets")
    grant(member, server, "discover", "execute")
    grant(member, other_server, "discover", "execute")

    def principal(*scopes):
        return Principal(
            user=member, token_id=1, agent="a", tenant="", scopes=frozenset(scopes), delegation_chain=("user:member",)
        )

    assert tool_pks_visible_to(principal=principal("discover", "execute")) == {tool.pk, other.pk}
    assert tool_pks_visible_to(principal=principal("execute")) == frozenset()  # no discover scope
    assert tool_pks_visible_to(principal=principal("discover"), permission="execute") == frozenset()
    narrowed = principal("discover", "execute", "server:jira")
    assert tool_pks_visible_to(principal=narrowed) == {other.pk}
    with pytest.raises(ToolNotFound):
        tool_get_for_principal(principal=narrowed, tool_id=tool.tool_id, permission="execute")


def test_scopes_never_widen_rights(outsider, tool):
    principal = Principal(
        user=outsider,
        token_id=1,
        agent="",
        tenant="",
        scopes=frozenset({"discover", "execute", "approve", "server:github"}),
        delegation_chain=(),
    )
    assert tool_pks_visible_to(principal=principal) == frozenset()


def test_hidden_and_missing_tools_raise_the_same_error(member, grant, server, tool):
    hidden = ToolFactory(server=server, name="secret_tool")
    grant(member, tool, "discover")
    principal = as_principal(member)
    errors = []
    for tool_id in (
        hidden.tool_id,
        "github::does_not_exist",
        "GITHUB::secret_tool",
        "github::secret_tool ",
        "github::secret\x00tool",
        "github::secret_tool\r\n",
        "github::\u202esecret_tool",
        "x" * 10000,
    ):
        with pytest.raises(ToolNotFound) as exc:
            tool_get_for_principal(principal=principal, tool_id=tool_id)
        errors.append(str(exc.value))
    assert set(errors) == {"Unknown tool"}


def test_cache_entries_are_never_shared_across_users(member, outsider, grant, server, tool):
    grant(member, server, "discover")
    assert visible(member) == {tool.tool_id}  # fills member's cache entry
    assert visible(outsider) == set()


def test_narrowing_by_operation_class_environment_and_server(member, grant, server, tool):
    writer = ToolFactory(server=server, name="create_issue", annotations={"destructiveHint": False})
    staging = ServerFactory(slug="staging-github", environment="staging")
    staged = ToolFactory(server=staging, name="list_issues")
    grant(member, server, "discover")
    grant(member, staging, "discover")
    principal = as_principal(member)
    assert tool_pks_visible_to(principal=principal, operation_class="read") == {tool.pk, staged.pk}
    assert tool_pks_visible_to(principal=principal, operation_class="write") == {writer.pk}
    assert tool_pks_visible_to(principal=principal, environment="staging") == {staged.pk}
    assert tool_pks_visible_to(principal=principal, server_slugs=["github"]) == {tool.pk, writer.pk}
    tool.policy.allowed_environments = ["staging"]
    tool.policy.save()
    assert tool_pks_visible_to(principal=principal, environment="staging") == {staged.pk, tool.pk}


def test_tools_visible_to_queryset_matches_cached_pks(member, grant, server, tool):
    grant(member, server, "discover")
    principal = as_principal(member)
    assert set(tools_visible_to(principal=principal).values_list("pk", flat=True)) == tool_pks_visible_to(
        principal=principal
    )


def test_anonymous_user_sees_nothing_and_approves_nothing(tool):
    from django.contrib.auth.models import AnonymousUser

    from governance.selectors import user_can_approve

    anonymous = Principal(
        user=AnonymousUser(), token_id=None, agent="", tenant="", scopes=frozenset({"discover"}), delegation_chain=()
    )
    assert tool_pks_visible_to(principal=anonymous) == frozenset()
    assert user_can_approve(user=AnonymousUser(), tool=tool) is False


def test_this_process_serves_its_kept_set_until_the_version_moves(member, grant, server, tool):
    """The process's own copy is served again (the same object, not one unpickled from the shared cache on
    every search), and a change another process commits (the rows and the version row, no signals here) shows
    on the next call."""
    from catalog.models import Tool
    from governance.models import VisibilityVersion

    grant(member, server, "discover")
    principal = as_principal(member)
    first = tool_pks_visible_to(principal=principal)
    assert first == {tool.pk}
    assert tool_pks_visible_to(principal=principal) is first
    Tool.objects.filter(pk=tool.pk).update(enabled=False)
    VisibilityVersion.objects.filter(pk=1).update(token="written-by-another-process")
    assert tool_pks_visible_to(principal=principal) == frozenset()


def test_kept_sets_expire_as_the_shared_cache_does_and_stay_bounded():
    import time

    from governance.constants import VISIBILITY_CACHE_TTL_SECONDS
    from governance.selectors.tools import VisibleSets

    kept = VisibleSets()
    kept.put("stale", frozenset({1}), at=time.time() - VISIBILITY_CACHE_TTL_SECONDS)
    assert kept.get("stale") is None  # computed as long ago as the shared cache keeps an entry
    kept.size = 4  # tool ids held at the most
    kept.put("a", frozenset({1, 2}))
    kept.put("b", frozenset({3, 4}))
    assert kept.get("a") == {1, 2}  # used last: "b" is now the oldest
    kept.put("c", frozenset({5}))
    assert (kept.get("a"), kept.get("b"), kept.get("c")) == ({1, 2}, None, {5})


@pytest.mark.django_db(transaction=True)
def test_threads_missing_one_set_at_once_compute_it_once(member, grant, server, tool, monkeypatch):
    """After a grant change every search thread of a process misses the same set: one computes it, the others
    take its result (six copies of one large query had raced the database's statement timeout)."""
    import threading
    import time

    from django.db import connection

    from governance.selectors import tools as selector

    grant(member, server, "discover")
    principal = as_principal(member)
    computed = []
    real = selector._visible_pks_compute

    def counted(*args):
        computed.append(threading.get_ident())
        time.sleep(0.3)  # the others ask while this one reads
        return real(*args)

    monkeypatch.setattr(selector, "_visible_pks_compute", counted)
    start = threading.Barrier(6)
    answers = []

    def search():
        start.wait()
        try:
            answers.append(tool_pks_visible_to(principal=principal))
        finally:
            connection.close()

    threads = [threading.Thread(target=search) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert answers == [frozenset({tool.pk})] * 6
    assert len(computed) == 1


@pytest.mark.parametrize(
    "hide",
    [
        pytest.param(lambda t: setattr(t, "enabled", False) or t.save(), id="disabled"),
        pytest.param(_hold, id="held"),
        pytest.param(_sync_fails, id="server-failed-sync"),
        pytest.param(lambda t: ToolPolicy.objects.filter(tool=t).delete(), id="policy-deleted"),
    ],
)
def test_a_tool_found_once_is_not_found_after_it_is_hidden(member, grant, server, tool, hide):
    """The lookup remembers a tool it found (governance.selectors.tools.found_tools, under the visibility version):
    any change that hides it, bulk writes too, makes the next lookup ask the database again."""
    grant(member, server, "discover", "execute")
    principal = as_principal(member)
    assert tool_get_for_principal(principal=principal, tool_id=tool.tool_id, permission="execute") == tool
    assert tool_get_for_principal(principal=principal, tool_id=tool.tool_id, permission="execute") == tool
    hide(tool)
    with pytest.raises(ToolNotFound):
        tool_get_for_principal(principal=principal, tool_id=tool.tool_id, permission="execute")


def test_a_found_tool_is_read_fresh_and_one_principal_never_gets_anothers(member, outsider, grant, server, tool):
    from governance.selectors.tools import found_tools

    grant(member, server, "discover", "execute")
    principal = as_principal(member)
    tool_get_for_principal(principal=principal, tool_id=tool.tool_id, permission="execute")
    # A schema change accepted without any visibility change: the next lookup returns the row as it is now.
    type(tool).objects.filter(pk=tool.pk).update(input_schema={"type": "object", "properties": {"n": {}}})
    again = tool_get_for_principal(principal=principal, tool_id=tool.tool_id, permission="execute")
    assert again.input_schema == {"type": "object", "properties": {"n": {}}}
    with pytest.raises(ToolNotFound):
        tool_get_for_principal(principal=as_principal(outsider), tool_id=tool.tool_id, permission="execute")
    # Hidden and unknown ids are never remembered: both always cost the same one database query (Z5).
    found_tools.clear()
    for tool_id in (tool.tool_id, f"{tool.server.slug}::nope"):
        with pytest.raises(ToolNotFound):
            tool_get_for_principal(principal=as_principal(outsider), tool_id=tool_id, permission="execute")
    assert len(found_tools) == 0


def test_tool_executable_by_needs_execute_and_with_a_definition_only_that_one(member, grant, server, tool):
    """The one check of "may execute this tool now" (an approval's use, the re-check before an upstream call):
    a discover grant is not enough, an execute-scoped token is needed, and a definition it was asked for that the
    tool no longer has is refused."""
    from governance.selectors import tool_executable_by

    grant(member, server, "discover")
    principal = as_principal(member)
    assert not tool_executable_by(principal=principal, tool_pk=tool.pk)
    grant(member, server, "execute")
    assert tool_executable_by(principal=principal, tool_pk=tool.pk)
    assert tool_executable_by(principal=principal, tool_pk=tool.pk, definition_hash=tool.definition_hash)
    assert not tool_executable_by(principal=principal, tool_pk=tool.pk, definition_hash="an-earlier-definition")
    discover_only = as_principal(member, scopes=frozenset({"discover"}))
    assert not tool_executable_by(principal=discover_only, tool_pk=tool.pk)
