"""Links on the pages a role opens lead to pages that role may open: no dead end at a 403."""

import json

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from catalog.models import ToolRevision
from catalog.services.imports import catalog_import_file
from governance.roles import CURATORS, OPERATORS
from tests.governance.factories import UserFactory

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
def test_the_dashboards_pending_count_links_the_inbox_only_for_whom_may_open_it(client, superuser, role):
    """An operator gets the requests counted, with who may decide each, as the audit trail they read names them; a
    curator (no audit trail) the number alone: never a link to a 403 page."""
    inbox, waiting = reverse("admin:governance_approvalrequest_changelist"), reverse("dashboard_approvals")
    client.force_login(_person("someone", role))
    response = client.get(reverse("dashboard"))
    html = response.content.decode()
    assert response.status_code == 200 and inbox not in html and client.get(inbox).status_code == 403
    if role == OPERATORS:
        assert f'<a href="{waiting}">0</a>' in html and client.get(waiting).status_code == 200
    else:
        assert 'id="tile-pending-approvals">0<' in html and client.get(waiting).status_code == 403

    client.force_login(superuser)
    assert f'<a href="{inbox}">0</a>' in client.get(reverse("dashboard")).content.decode()
