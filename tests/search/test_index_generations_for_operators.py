"""mend4: operators watch sync, health and dashboards (USERS.md), yet their only view of the search index was /readyz:
index generations were the curators' and whole-install readers'. The Operators preset now reads them (read-only, as
their sync runs): the list and a generation's page, nothing to add, change or delete. A generation's page names only
the tools its reader may open; the others it counts."""

import re

import pytest
from django.contrib.auth.models import Group, Permission
from django.urls import reverse
from django.utils import timezone

from governance.roles import OPERATORS
from search.choices import GenerationKind, GenerationStatus
from search.models import IndexGeneration
from tests.governance.factories import ServerFactory, ToolFactory
from tests.search.test_index_generation_page import _fields

pytestmark = pytest.mark.django_db


@pytest.fixture
def generation():
    server = ServerFactory(slug="time")
    tools = [ToolFactory(server=server, name="get_current_time"), ToolFactory(server=server, name="convert_time")]
    return IndexGeneration.objects.create(
        kind=GenerationKind.INCREMENTAL,
        status=GenerationStatus.READY,
        finished_at=timezone.now(),
        tool_count=2,
        tool_pks=[tool.pk for tool in tools] + [999_999],  # the last one deleted since
    )


def test_an_operator_reads_index_generations_and_changes_nothing(client, django_user_model, generation):
    operator = django_user_model.objects.create_user(username="oli", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    client.force_login(operator)

    listing = client.get(reverse("admin:search_indexgeneration_changelist"))
    assert listing.status_code == 200
    assert [row.pk for row in listing.context["cl"].result_list] == [generation.pk]
    assert 'href="/admin/search/indexgeneration/' in client.get(reverse("admin:index")).content.decode()

    url = reverse("admin:search_indexgeneration_change", args=[generation.pk])
    page = client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert _fields(html)["Tools reindexed"] == "time::convert_time, time::get_current_time, 1 no longer in the catalog"
    assert 'name="_save"' not in html and "deletelink" not in html  # read-only: no save, no delete

    before = list(IndexGeneration.objects.values())
    assert client.post(url, {"status": GenerationStatus.FAILED}).status_code == 403
    assert client.get(reverse("admin:search_indexgeneration_add")).status_code == 403
    assert (
        client.post(reverse("admin:search_indexgeneration_delete", args=[generation.pk]), {"post": "yes"}).status_code
        == 403
    )
    assert list(IndexGeneration.objects.values()) == before


def test_a_generation_names_only_the_tools_its_reader_may_open(client, django_user_model, generation):
    """A reader of the index who may not open tools (a group made with the generation's view permission alone) reads
    how many were reindexed, not which."""
    watcher = django_user_model.objects.create_user(username="watcher", is_staff=True)
    watcher.user_permissions.add(Permission.objects.get(codename="view_indexgeneration"))
    client.force_login(watcher)
    html = client.get(reverse("admin:search_indexgeneration_change", args=[generation.pk])).content.decode()
    assert _fields(html)["Tools reindexed"] == "2 you may not open, 1 no longer in the catalog"
    assert not re.search("get_current_time|convert_time", html)
