"""Tool and server pages are named for the tool or server and for what their reader does there, not Django's
"Change tool" / "Select tool to change"; the phrase sections add "another alias", not "another Tool alias"."""

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from governance.roles import CURATORS, OPERATORS
from tests.governance.factories import ServerFactory, ToolFactory

pytestmark = pytest.mark.django_db


def _staff(django_user_model, username: str, role: str):
    user = django_user_model.objects.create_user(username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return user


def test_a_curator_curates_the_tool_named_in_the_title(client, django_user_model):
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="send_email")
    client.force_login(_staff(django_user_model, "cur", CURATORS))
    page = client.get(reverse("admin:catalog_tool_change", args=[tool.pk]))
    html = page.content.decode()
    assert page.context["title"] == "Curate mail::send_email"
    assert "<title>Curate mail::send_email | Scout admin</title>" in html
    assert "Change tool" not in html
    for phrase in ("alias", "keyword", "example request", "negative query"):
        assert f"Add another {phrase}" in html or f"Add another {phrase.capitalize()}" in html, phrase
    assert "Tool alias" not in html and "Tool keyword" not in html
    listing = client.get(reverse("admin:catalog_tool_changelist"))
    assert listing.context["title"].startswith("Tools — open one to curate")


def test_an_operator_reads_the_tool_page_under_its_name(client, django_user_model):
    """An operator grants access on a tool page but curates nothing: the title does not say "Curate"."""
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="send_email")
    client.force_login(_staff(django_user_model, "op", OPERATORS))
    page = client.get(reverse("admin:catalog_tool_change", args=[tool.pk]))
    assert page.context["title"] == "Tool mail::send_email"
    assert "Change tool" not in page.content.decode()
    assert "Tools you may curate" not in client.get(reverse("admin:catalog_tool_changelist")).content.decode()


def test_the_server_page_is_named_for_the_server(client, django_user_model):
    server = ServerFactory(slug="mail")
    client.force_login(_staff(django_user_model, "op", OPERATORS))
    page = client.get(reverse("admin:catalog_server_change", args=[server.pk]))
    assert page.context["title"] == "Server mail"
    assert "Change server" not in page.content.decode()
    listing = client.get(reverse("admin:catalog_server_changelist"))
    assert listing.context["title"].startswith("Servers — ")


@pytest.mark.parametrize(
    ("changelist", "starts"),
    [
        ("admin:catalog_syncrun_changelist", "Sync runs — "),
        ("admin:catalog_toolrevision_changelist", "Tool revisions — "),
        ("admin:governance_toolreview_changelist", "Tool reviews — tools held from clients"),
    ],
)
def test_record_lists_say_what_they_hold(client, superuser, changelist, starts):
    """An empty list under "Select tool review to change" told a curator nothing about what would appear there."""
    client.force_login(superuser)
    page = client.get(reverse(changelist))
    assert page.context["title"].startswith(starts)
    assert "Select " not in page.content.decode().split("<h1>", 1)[1].split("</h1>", 1)[0]
