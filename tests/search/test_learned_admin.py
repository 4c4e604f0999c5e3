"""The curator's list of learned requests: says what to do with them, and leads to each tool (read what it does
before promoting users' words to it)."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.roles import CURATORS
from search.models import LearnedRequest
from tests.governance.factories import ServerFactory, ToolFactory

pytestmark = pytest.mark.django_db


def test_the_list_says_what_to_do_and_links_each_tool(client, django_user_model):
    curator = django_user_model.objects.create_user(username="cur", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="list_inbox")
    LearnedRequest.objects.create(tool=tool, text="did my landlord write", key="k1", principal_count=2, confirmations=5)
    client.force_login(curator)
    page = client.get(reverse("admin:search_learnedrequest_changelist"))
    html = page.content.decode()
    assert page.context["title"].startswith("Learned requests — promote the right ones")
    tool_url = reverse("admin:catalog_tool_change", args=[tool.pk])
    assert f'<a href="{tool_url}">mail::<wbr>list_<wbr>inbox</a>' in html
    assert ">Callers</a>" in html and ">Successful calls</a>" in html
    assert '<td class="field-callers">2</td>' in html and '<td class="field-calls">5</td>' in html
    assert client.get(tool_url).status_code == 200
