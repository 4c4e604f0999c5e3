"""The curator home's work counts: tools without example requests are the ones this curator may curate, and the
workbench counts are not regrouped from the query log on every load, yet follow a curation change at once."""

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from governance.principals import principal_for_user
from governance.roles import CURATORS
from search.engine.ranking import Confidence
from search.models import QueryLogEntry
from search.usage import LoggedResult, query_log_record

pytestmark = pytest.mark.django_db


def _curator(django_user_model, username="cur"):
    user = django_user_model.objects.create_user(username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=CURATORS))
    return user


def _listed_from_home(client, home) -> list[str]:
    link = 'id="no-examples-all" href="'
    href = home.content.decode().split(link, 1)[1].split('"', 1)[0].replace("&amp;", "&")
    return sorted(tool.tool_id for tool in client.get(href).context["cl"].result_list)


def test_a_tenant_curator_counts_only_the_tools_they_may_curate(client, django_user_model, superuser):
    """A shared server's tools are a superuser's to curate once there are tenants: they are no work of tenant A's
    curator, and the tool list the count links to lists the same tools."""
    from governance.models import ServerTenant
    from tests.governance.factories import ServerFactory, ToolFactory, tenant_with

    curator = _curator(django_user_model, "cur-a")
    tenant = tenant_with("tenant-a", curator)
    shared, own = ServerFactory(slug="shared-srv"), ServerFactory(slug="own-srv")
    ServerTenant.objects.create(server=own, tenant=tenant)
    own_tools = sorted(ToolFactory(server=own, name=f"own_{n}").tool_id for n in range(2))
    shared_tools = sorted(ToolFactory(server=shared, name=f"shared_{n}").tool_id for n in range(3))

    client.force_login(curator)
    home = client.get(reverse("admin:index"))
    assert home.context["curator_panel"]["no_examples_count"] == 2
    assert [tool.tool_id for tool in home.context["curator_panel"]["no_examples"]] == own_tools
    assert _listed_from_home(client, home) == own_tools

    client.force_login(superuser)  # who curates shared tools counts them too
    home = client.get(reverse("admin:index"))
    assert home.context["curator_panel"]["no_examples_count"] == 5
    assert _listed_from_home(client, home) == sorted(own_tools + shared_tools)


def _log(user, query: str, confidence: str) -> None:
    query_log_record(
        principal=principal_for_user(user),
        query=query,
        results=[LoggedResult(tool_id="x::y", score=0.2)] if confidence == Confidence.LOW else [],
        confidence=confidence,
        degraded=False,
        backend="embedded",
        latency_ms=5,
    )


def test_workbench_counts_are_kept_briefly_and_follow_an_attach_at_once(
    client, django_user_model, member, django_capture_on_commit_callbacks
):
    from tests.governance.factories import ServerFactory, ToolFactory

    tool = ToolFactory(server=ServerFactory(slug="travel"), name="book_flight")
    _log(member, "book a flight", Confidence.NONE)
    _log(member, "order a pizza", Confidence.LOW)
    client.force_login(_curator(django_user_model))
    first = client.get(reverse("admin:index")).context["curator_panel"]["workbench"]
    assert first == {"total": 2, "withheld": 1, "low": 1, "unfollowed": 0}

    table = QueryLogEntry._meta.db_table
    with CaptureQueriesContext(connection) as queries:
        again = client.get(reverse("admin:index")).context["curator_panel"]["workbench"]
    assert again == first
    assert not [q["sql"] for q in queries.captured_queries if table in q["sql"]]  # the log is not read again

    # Attaching a waiting request to a tool changes the counts on the very next load.
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            reverse("search_workbench"), {"text": "book a flight", "tool_id": tool.tool_id, "kind": "example"}
        )
    assert response.status_code == 302
    after = client.get(reverse("admin:index")).context["curator_panel"]["workbench"]
    assert after == {"total": 1, "withheld": 0, "low": 1, "unfollowed": 0}


def test_the_home_says_when_a_request_counts_under_several_reasons(client, django_user_model, member):
    """A request asked twice, withheld once and low once, is one group under two reasons: "1 waiting: 1 withheld ·
    1 low confidence" read as a miscount (at a year's volume 1129 waiting, 1334 by reason) without a word why."""
    _log(member, "order a pizza", Confidence.NONE)
    client.force_login(_curator(django_user_model))
    assert 'id="workbench-overlap"' not in client.get(reverse("admin:index")).content.decode()
    _log(member, "order a pizza", Confidence.LOW)
    cache.clear()  # the home keeps its counts briefly
    html = client.get(reverse("admin:index")).content.decode()
    assert "Requests agents got no good answer for (last 30 days): 1" in html
    assert "1 withheld" in html and "1 low confidence" in html
    assert 'id="workbench-overlap"' in html and "under more than one of these" in html
