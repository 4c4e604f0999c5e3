"""Links on the pages a role opens lead to pages that role may open: no dead end at a 403."""

import json

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from catalog.models import ToolRevision
from catalog.services.imports import catalog_import_file
from governance.principals import principal_for_user
from governance.roles import CURATORS, OPERATORS
from governance.services.approvals import approval_request_create
from governance.services.permissions import permission_grant
from tests.governance.factories import ServerFactory, ToolFactory, UserFactory

pytestmark = pytest.mark.django_db


def _person(username: str, role: str):
    user = UserFactory(username=username, is_staff=True)
    user.groups.add(Group.objects.get(name=role))
    return user


@pytest.fixture
def revision(tmp_path) -> ToolRevision:
    path = tmp_path / "wiki.jsonl"
    path.write_text(json.dumps({"server": "wiki", "name": "page_get", "description": "Read a wiki page."}) + "\n")
    catalog_import_file(path=path)
    return ToolRevision.objects.select_related("sync_run").get()


def test_a_curator_reads_a_revisions_sync_run_by_name_and_an_operator_opens_it(client, revision):
    run_url = reverse("admin:catalog_syncrun_change", args=[revision.sync_run.pk])
    page = reverse("admin:catalog_toolrevision_change", args=[revision.pk])

    client.force_login(_person("curator-1", CURATORS))
    html = client.get(page).content.decode()
    assert str(revision.sync_run) in html and run_url not in html
    assert client.get(run_url).status_code == 403  # the page such a link would open

    client.force_login(_person("operator-1", OPERATORS))
    assert run_url in client.get(page).content.decode()
    assert client.get(run_url).status_code == 200


@pytest.mark.parametrize("role", [CURATORS, OPERATORS])
def test_the_dashboards_pending_count_links_the_inbox_only_for_whom_may_open_it(client, superuser, member, role):
    """An operator gets the requests counted, with who may decide each, as the audit trail they read names them; a
    curator (no audit trail) the number alone: never a link to a 403 page."""
    tool = ToolFactory(server=ServerFactory(slug="github"), name="delete_repo", annotations=None)
    for action in ("discover", "execute"):
        permission_grant(actor=superuser, target=tool, action=action, holder=member)
    approval_request_create(principal=principal_for_user(member), tool=tool, arguments={"repo": "x"})
    inbox, waiting = reverse("admin:governance_approvalrequest_changelist"), reverse("dashboard_approvals")
    client.force_login(_person("someone", role))
    response = client.get(reverse("dashboard"))
    html = response.content.decode()
    assert response.status_code == 200 and inbox not in html and client.get(inbox).status_code == 403
    if role == OPERATORS:
        assert f'<a href="{waiting}">1</a>' in html and client.get(waiting).status_code == 200
    else:
        assert 'id="tile-pending-approvals"><a' not in html and client.get(waiting).status_code == 403

    client.force_login(superuser)
    assert f'<a href="{inbox}">1</a>' in client.get(reverse("dashboard")).content.decode()


def test_a_person_page_offers_reset_password_only_to_whoever_may_open_it(client, superuser, django_user_model):
    """Operators and curators read people but never change them: Django's "Reset password" button led them to a
    "not part of your role" page. They read the password's summary; a superuser keeps the button."""
    person = django_user_model.objects.create_user(username="someone", password="pw-someone-123")
    page = reverse("admin:auth_user_change", args=[person.pk])
    password_page = reverse("admin:auth_user_password_change", args=[person.pk])
    for role in (OPERATORS, CURATORS):
        client.force_login(_person(f"{role.lower()}-1", role))
        html = client.get(page).content.decode()
        assert "<strong>algorithm</strong>" in html and "Reset password" not in html and "../password/" not in html, (
            role
        )
        assert client.get(password_page).status_code == 403, role  # the page the button opened
    client.force_login(superuser)
    assert "Reset password" in client.get(page).content.decode()
    assert client.get(password_page).status_code == 200
