"""Each role's admin home shows its work first; the navigation is grouped by job; approvers see a count."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.roles import APPROVERS, CURATORS, OPERATORS
from governance.services.approvals import approval_request_create

pytestmark = pytest.mark.django_db


def _staff(django_user_model, username: str, role: str):
    user = django_user_model.objects.create_user(username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return user


def test_approver_home_lists_pending_requests_with_a_count(client, django_user_model, grant, server, mutating_tool,
                                                           member_token):  # fmt: skip
    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    request = approval_request_create(principal=principal, tool=mutating_tool, arguments={"name": "x"})
    user = _staff(django_user_model, "appr", APPROVERS)
    grant(Group.objects.get(name=APPROVERS), server, "approve")
    client.force_login(user)
    html = client.get(reverse("admin:index")).content.decode()
    assert 'id="approver-home"' in html and 'class="scout-count">1<' in html
    # The tool as the inbox shows it: the narrow column wraps after "::" and "_", never letter by letter; then the
    # call's arguments, which tell two calls of one tool apart.
    tool = 'github::<wbr>delete_<wbr>repo<br><small class="call-arguments">name: &quot;x&quot;</small>'
    assert f'<td data-label="Tool">{tool}</td>' in html
    assert reverse("admin:governance_approvalrequest_decide", args=[request.pk]) in html
    assert 'id="pending-approvals"' in html  # the header count
    assert 'id="curator-home"' not in html and 'id="operator-home"' not in html


def test_an_approver_without_grants_is_told_how_to_get_them_not_refused(client, django_user_model, grant, server):
    user = _staff(django_user_model, "appr", APPROVERS)
    client.force_login(user)
    html = client.get(reverse("admin:index")).content.decode()
    assert 'id="approver-unassigned"' in html and "Nothing to approve yet" in html
    assert "have permission to view or edit anything" not in html and 'id="pending-approvals"' not in html
    grant(Group.objects.get(name=APPROVERS), server, "approve")  # once given, the inbox replaces the note
    html = client.get(reverse("admin:index")).content.decode()
    assert 'id="approver-home"' in html and 'id="approver-unassigned"' not in html


def test_curator_home_shows_workbench_and_tools_without_examples(client, django_user_model, tool):
    client.force_login(_staff(django_user_model, "cur", CURATORS))
    html = client.get(reverse("admin:index")).content.decode()
    assert 'id="curator-home"' in html and reverse("search_workbench") in html
    assert tool.tool_id in html  # a live tool with no example request needs attention
    assert "Search &amp; curation" in html and "Search preview" in html  # navigation grouped, pages in it
    assert 'id="approver-home"' not in html and 'id="pending-approvals"' not in html


def test_curator_home_leads_to_every_tool_without_example_requests(client, django_user_model, server):
    from catalog.models import ToolExample
    from tests.governance.factories import ToolFactory

    tools = [ToolFactory(server=server, name=f"tool_{n:02d}") for n in range(12)]
    ToolExample.objects.create(tool=tools[0], text="an example request")
    held = tools[1].policy
    held.held = True
    held.save()
    client.force_login(_staff(django_user_model, "cur", CURATORS))
    home = client.get(reverse("admin:index"))
    assert home.context["curator_panel"]["no_examples_count"] == 10  # of which the home names the first few
    link = 'id="no-examples-all" href="'
    href = home.content.decode().split(link, 1)[1].split('"', 1)[0].replace("&amp;", "&")
    listing = client.get(href)
    listed = sorted(tool.tool_id for tool in listing.context["cl"].result_list)
    assert listed == [tool.tool_id for tool in tools[2:]]  # the same ten: live, not held, no example request


def test_operator_home_shows_server_health(client, django_user_model, server):
    server.transport = "stdio"
    server.save()
    client.force_login(_staff(django_user_model, "op", OPERATORS))
    html = client.get(reverse("admin:index")).content.decode()
    assert 'id="operator-home"' in html and server.slug in html and "Never synced" in html
    # An imported server has no live connection to sync: its health reads as the server list's, not "Never synced".
    server.transport = "imported"
    server.save()
    html = client.get(reverse("admin:index")).content.decode()
    assert "Never synced" not in html and '<span class="scout-badge s-active">Active</span>' in html
    assert "Servers &amp; sync" in html
    # Agents and tenants are who may use what: under Access with tokens and grants, not among the records.
    access, records = html.index('class="app-access module'), html.index('class="app-records module')
    for model in ("agent", "tenant", "apitoken"):
        assert access < html.index(reverse(f"admin:governance_{model}_changelist")) < records, model


def _links(html: str) -> set[str]:
    import re

    hrefs = {href.replace("&amp;", "&") for href in re.findall(r'href="(/admin/[^"#]*)"', html)}
    return {href for href in hrefs if "logout" not in href and "/delete/" not in href}


@pytest.mark.parametrize("role", [CURATORS, OPERATORS, APPROVERS])
def test_no_link_on_a_roles_pages_leads_it_to_a_refusal(
    role, client, django_user_model, grant, server, mutating_tool, member_token
):
    """A newcomer in one role clicks through their home, the server list, the notification log and the search
    pages: every admin link shown there opens (a link to a page the role may not see is a dead end)."""
    from django.utils import timezone

    from catalog.models import SyncRun
    from governance.models import NotificationAttempt

    SyncRun.objects.create(server=server, status="success", started_at=timezone.now(), finished_at=timezone.now())
    _, _, principal = member_token
    grant(principal.user, server, "discover", "execute")
    request = approval_request_create(principal=principal, tool=mutating_tool, arguments={"name": "x"})
    NotificationAttempt.objects.create(approval=request, channel="email", outcome="sent", target="a@example.com")
    grant(Group.objects.get(name=APPROVERS), server, "approve")
    client.force_login(_staff(django_user_model, "newcomer", role))

    starts = ["admin:index", "admin:catalog_server_changelist", "admin:governance_notificationattempt_changelist",
              "search_preview", "search_workbench", "admin:governance_approvalrequest_changelist",
              "dashboard"]  # fmt: skip
    links: set[str] = set()
    for name in starts:
        response = client.get(reverse(name))
        if response.status_code == 200:  # a start page this role may open: the links on it must open too
            links |= _links(response.content.decode())
    assert reverse("admin:index") in links and len(links) > 4
    refused = sorted(link for link in links if client.get(link).status_code == 403)
    assert refused == [], refused


def test_a_page_outside_ones_role_explains_itself_and_leads_back(client, django_user_model):
    """A curator following the start page's "Approval inbox" button: a page saying why, with the way back,
    not a bare "403 Forbidden"."""
    client.force_login(_staff(django_user_model, "cur", CURATORS))
    response = client.get(reverse("admin:governance_approvalrequest_changelist"))
    html = response.content.decode()
    assert response.status_code == 403
    assert "not part of your role" in html and "signed in as <strong>cur</strong>" in html
    assert f'href="{reverse("admin:index")}"' in html and f'href="{reverse("home")}"' in html

    missing = client.get("/no-such-page/")
    assert missing.status_code == 404 and "No such page" in missing.content.decode()


def test_an_approver_with_nothing_waiting_sees_a_calm_zero(client, django_user_model, grant, server):
    grant(Group.objects.get(name=APPROVERS), server, "approve")
    client.force_login(_staff(django_user_model, "appr", APPROVERS))
    html = client.get(reverse("admin:index")).content.decode()
    assert 'class="scout-count none">0<' in html and "Nothing is waiting" in html  # grey, not the alarm red


@pytest.fixture
def tenant_curator_world(django_user_model):
    """Tenant A's curator, a held change on tenant A's server ("own") and one on a shared server ("shared")."""
    from governance.models import ServerTenant
    from tests.governance.admin.test_shared_tools_classified_by_superusers import _held
    from tests.governance.factories import ServerFactory, tenant_with

    curator = _staff(django_user_model, "cur-a", CURATORS)
    tenant = tenant_with("tenant-a", curator)
    shared, own = ServerFactory(slug="shared-srv"), ServerFactory(slug="own-srv")
    ServerTenant.objects.create(server=own, tenant=tenant)
    return {"curator": curator, "shared": _held(shared), "own": _held(own)}


def test_a_tenant_curators_home_lists_only_the_reviews_they_may_decide(client, tenant_curator_world):
    """A shared server's held change is a superuser's to decide once there are tenants: tenant A's curator gets
    their own tenant's review as work, and the shared one counted apart with who decides it, not as a link to a
    page whose buttons they would not find."""
    world = tenant_curator_world
    client.force_login(world["curator"])
    home = client.get(reverse("admin:index"))
    html = home.content.decode()
    own, shared = world["own"], world["shared"]
    assert [review.pk for review in home.context["curator_panel"]["held"]] == [own.pk]
    assert reverse("admin:governance_toolreview_change", args=[own.pk]) in html
    assert reverse("admin:governance_toolreview_change", args=[shared.pk]) not in html
    assert "Held for your review: 1" in html
    assert 'id="held-shared">1 more held on' in html and "a superuser reviews those" in html


def test_a_superusers_home_lists_the_shared_reviews_too(client, superuser, tenant_curator_world):
    world = tenant_curator_world
    client.force_login(superuser)
    home = client.get(reverse("admin:index"))
    assert {review.pk for review in home.context["curator_panel"]["held"]} == {world["own"].pk, world["shared"].pk}
    assert 'id="held-shared"' not in home.content.decode()


def test_operator_home_counts_tools_as_the_server_list_and_links_them(client, django_user_model, server):
    """“N live, M held” on the home is what the tool list shows behind each link: a disabled tool is not live, and
    a tool no review has accepted yet (no policy) is held, as the server list counts them."""
    from catalog.models import Tool
    from governance.models import ToolPolicy
    from tests.governance.factories import ToolFactory

    live = ToolFactory(server=server, name="live_one")
    ToolFactory(server=server, name="disabled_one", enabled=False)
    unaccepted = ToolFactory(server=server, name="unaccepted_one")
    ToolPolicy.objects.filter(tool=unaccepted).delete()
    client.force_login(_staff(django_user_model, "op", OPERATORS))
    html = client.get(reverse("admin:index")).content.decode()
    tools = reverse("admin:catalog_tool_changelist")
    live_url, held_url = (f"{tools}?server={server.slug}&amp;status={status}" for status in ("live", "held"))
    assert f'<a href="{live_url}">1 live</a>' in html
    assert f'<a class="scout-held-text" href="{held_url}"><strong>1 held</strong></a>' in html
    for url, expected in ((live_url, [live]), (held_url, [unaccepted])):
        listing = client.get(url.replace("&amp;", "&"))
        assert list(listing.context["cl"].result_list) == expected
    assert Tool.objects.filter(server=server).count() == 3


def test_curator_home_counts_the_requests_waiting_in_the_workbench_by_why(client, django_user_model, member):
    """The curator's main work is on the home: how many requests got no good answer, each kind a link to the
    workbench showing those."""
    from governance.principals import principal_for_user
    from search.engine.ranking import Confidence
    from search.usage import LoggedResult, query_log_record

    for query, confidence in (("book a flight", Confidence.NONE), ("order a pizza", Confidence.LOW)):
        query_log_record(
            principal=principal_for_user(member),
            query=query,
            results=[LoggedResult(tool_id="mail::send_email", score=0.2)] if confidence == Confidence.LOW else [],
            confidence=confidence,
            degraded=False,
            backend="embedded",
            latency_ms=5,
        )
    client.force_login(_staff(django_user_model, "cur", CURATORS))
    home = client.get(reverse("admin:index"))
    assert home.context["curator_panel"]["workbench"] == {"total": 2, "withheld": 1, "low": 1, "unfollowed": 0}
    html = home.content.decode()
    assert "Requests agents got no good answer for (last 30 days): 2" in html
    withheld = f'<a href="{reverse("search_workbench")}?reason=withheld">1 withheld</a>'
    assert withheld in html
    page = client.get(f"{reverse('search_workbench')}?reason=withheld").content.decode()
    assert "book a flight" in page and "order a pizza" not in page


def test_curator_home_links_no_kind_of_request_none_wait_under(client, django_user_model, member):
    """Adminux24: "0 withheld" was a link to an empty workbench list; a kind nothing waits under is a count, not a
    link, while the kinds something waits under stay links."""
    from governance.principals import principal_for_user
    from search.engine.ranking import Confidence
    from search.usage import LoggedResult, query_log_record

    query_log_record(
        principal=principal_for_user(member),
        query="order a pizza",
        results=[LoggedResult(tool_id="mail::send_email", score=0.2)],
        confidence=Confidence.LOW,
        degraded=False,
        backend="embedded",
        latency_ms=5,
    )
    client.force_login(_staff(django_user_model, "cur", CURATORS))
    html = client.get(reverse("admin:index")).content.decode()
    workbench = reverse("search_workbench")
    assert f'<a href="{workbench}?reason=low">1 low confidence</a>' in html
    for reason, text in (("withheld", "0 withheld"), ("unfollowed", "0 not followed by a call")):
        assert f"?reason={reason}" not in html and text in html


def test_curator_home_says_none_wait_in_the_workbench(client, django_user_model):
    client.force_login(_staff(django_user_model, "cur", CURATORS))
    html = client.get(reverse("admin:index")).content.decode()
    assert "Requests agents got no good answer for (last 30 days): 0" in html and "None waiting." in html


def test_an_approver_with_nothing_waiting_is_told_truly_whether_requests_are_mailed(
    client, django_user_model, grant, server
):
    """Only an approver with an address reads that new requests are e-mailed; without one, where they show."""
    grant(Group.objects.get(name=APPROVERS), server, "approve")
    approver = _staff(django_user_model, "appr", APPROVERS)
    client.force_login(approver)

    def said() -> str:
        html = client.get(reverse("admin:index")).content.decode()
        return html.split('id="approver-nothing">', 1)[1].split("</p>", 1)[0]

    assert "not e-mailed to you" in said() and "e-mailed to you." not in said()
    approver.email = "appr@example.com"
    approver.save()
    assert said() == "Nothing is waiting. New requests are e-mailed to you."


def test_operator_home_lists_a_failing_server_first_and_leads_to_all_of_them(client, django_user_model):
    # Listed by slug and cut at 30, a failing server whose slug sorts late was not on the home at all, and the page
    # said "Servers: 32" with no way to the other two.
    from django.utils import timezone

    from tests.governance.factories import ServerFactory

    synced = timezone.now()
    for n in range(31):
        ServerFactory(slug=f"a-{n:02d}", last_synced_at=synced)
    ServerFactory(slug="zz-payments", status="unavailable", last_synced_at=synced)
    client.force_login(_staff(django_user_model, "op", OPERATORS))
    html = client.get(reverse("admin:index")).content.decode()
    home = html[html.index('id="operator-home"') :]
    assert "zz-payments" in home and home.index("zz-payments") < home.index("a-00")
    assert "Servers: 32" in home and "a-29" not in home
    assert f'<a href="{reverse("admin:catalog_server_changelist")}">all 32 servers</a>' in home
