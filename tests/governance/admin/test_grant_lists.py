"""The grant lists (Access → Server/Tool grants to groups/users): filtered by what a grant allows, read in a
fixed number of queries however many grants are listed."""

import pytest
from django.contrib.auth.models import Group
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from governance.roles import OPERATORS
from tests.governance.factories import GroupFactory, ServerFactory, UserFactory

pytestmark = pytest.mark.django_db
LIST = reverse("admin:governance_servergroupobjectpermission_changelist")


@pytest.fixture
def operator():
    user = UserFactory(username="grant-operator", is_staff=True)
    user.groups.add(Group.objects.get(name=OPERATORS))
    return user


def _grant_servers(grant, count: int, start: int = 0) -> None:
    for n in range(start, start + count):
        server = ServerFactory(slug=f"svc-{n}")
        grant(GroupFactory(name=f"team-{n}"), server, "discover", "execute")
        grant(UserFactory(username=f"someone-{n}"), server, "discover")


def test_the_permission_filter_offers_the_three_actions_and_filters_by_one(client, operator, grant):
    _grant_servers(grant, 2)
    client.force_login(operator)
    listing = client.get(LIST)
    assert listing.status_code == 200
    (spec,) = listing.context["cl"].filter_specs
    assert [choice["display"] for choice in spec.choices(listing.context["cl"])] == [
        "All",
        "discover",
        "execute",
        "approve",
    ]  # not every permission of the install ("Administration | log entry | Can add log entry", ...)
    assert "log entry" not in listing.content.decode()

    executing = client.get(LIST, {"permission": "execute"})
    rows = list(executing.context["cl"].result_list)
    assert len(rows) == 2 and {row.permission.codename for row in rows} == {"execute_server"}


@pytest.mark.parametrize("name", ["servergroupobjectpermission", "serveruserobjectpermission"])
def test_a_grant_list_reads_the_same_number_of_queries_for_more_grants(client, operator, grant, name):
    client.force_login(operator)
    url = reverse(f"admin:governance_{name}_changelist")
    _grant_servers(grant, 2)
    with CaptureQueriesContext(connection) as few:
        assert client.get(url).status_code == 200
    _grant_servers(grant, 6, start=2)
    with CaptureQueriesContext(connection) as more:
        response = client.get(url)
    assert response.status_code == 200 and "svc-7" in response.content.decode()
    assert len(more) == len(few), [query["sql"][:120] for query in more.captured_queries]


@pytest.mark.parametrize(
    ("model", "label"), [("servergroupobjectpermission", "Server"), ("tooluserobjectpermission", "Tool")]
)
def test_the_granted_object_is_named_for_what_it_is(client, superuser, grant, model, label):
    """The list's column and the add form's field read "Server" or "Tool", never the field's "Content object"."""
    from django.contrib.admin.templatetags.admin_list import result_headers

    from tests.governance.factories import ToolFactory

    _grant_servers(grant, 1)
    grant(UserFactory(username="tool-user"), ToolFactory(server=ServerFactory(slug="svc-0")), "execute")
    client.force_login(superuser)
    listing = client.get(reverse(f"admin:governance_{model}_changelist"))
    headers = [header["text"] for header in result_headers(listing.context["cl"])]
    assert label.lower() in headers and "Content object" not in headers
    adding = client.get(reverse(f"admin:governance_{model}_add")).content.decode()
    assert f'<label class="required" for="id_content_object">{label}:</label>' in adding
    assert "Content object" not in adding
