"""mend1: an internal error (not the upstream's) during a never-synced server's first sync left it "Never synced",
its last error empty: the operator saw nothing had happened. The run is failed with its reason, and the server reads
as after a failed first sync (Unavailable, the reason its last error) on its list, its page and the home."""

import pytest
from django.urls import reverse

from catalog.models import Server, SyncRun
from tests.db_refusal import writes_refused
from tests.governance.admin.test_server_form import _form, _messages, operator  # noqa: F401 - the operator fixture

# Committed, as a real request is: the first sync's message is added once the new server is committed.
pytestmark = pytest.mark.django_db(transaction=True)

REFUSED = "the disk is full"


@pytest.fixture
def tools_refused():
    """The database refuses every new tool (a full disk, a revoked grant): a failure of Scout's, not the upstream's."""
    with writes_refused("mend1_refuse", "INSERT ON catalog_tool", REFUSED):
        yield


def test_a_first_sync_failed_by_an_internal_error_is_shown_failed_with_its_reason(client, operator, tools_refused):  # noqa: F811
    client.force_login(operator)
    response = client.post(reverse("admin:catalog_server_add"), _form(slug="clock"), follow=True)
    assert response.status_code == 200  # the operator is told, not shown an error page
    (said,) = [text for text in _messages(response) if text.startswith("First sync of clock")]
    assert said.startswith("First sync of clock failed: internal error while saving the listing"), said
    run = SyncRun.objects.get(server__slug="clock")
    assert run.status == "failed" and run.error.startswith("internal error while saving the listing")
    assert REFUSED in run.error
    server = Server.objects.get(slug="clock")
    assert (server.status, server.last_error) == ("unavailable", run.error)
    for page in (
        reverse("admin:catalog_server_changelist"),
        reverse("admin:catalog_server_change", args=[server.pk]),
        reverse("admin:index"),
    ):
        html = client.get(page).content.decode()
        assert "Unavailable" in html and "Never synced" not in html, page
        if page != reverse("admin:catalog_server_changelist"):  # the list: its status, the reason on the page
            assert REFUSED in html, page
