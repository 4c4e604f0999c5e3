"""Model permissions act over REST only for staff, as in the admin (redteam35, Z7/T16): an operator whose staff status
was taken away (the People page's "staff status", their role group left as it was) could no longer sign in to the
admin, and their REST session was refused, but every token of theirs kept the model permissions: it edited servers,
a server's command among them, read the learned requests and the catalog's held definitions."""

import sys

from tests.api.conftest import api_db, give_perms, make_token

pytestmark = api_db


def test_a_person_no_longer_staff_uses_no_model_permission_through_a_token(api, catalog, owner, tmp_path):
    from catalog.models import Server

    give_perms(owner, "catalog.view_server", "catalog.change_server", "search.view_learnedrequest", "catalog.view_tool")
    token = make_token(owner, ["api", "discover"])
    assert api.get("servers/github/", token=token).status_code == 200
    assert api.get(f"tools/{catalog.held.tool_id}/", token=token).status_code == 200  # a curator reads held tools
    owner.is_staff = False
    owner.save()
    command = {"transport": "stdio", "command": sys.executable, "args": ["-c", f"open({str(tmp_path / 'x')!r}, 'w')"]}
    for method, path, body in [
        ("GET", "servers/", None),
        ("PATCH", "servers/github/", command),
        ("POST", "servers/github/sync/", None),
        ("GET", f"tools/{catalog.visible.tool_id}/learned-requests/", None),
    ]:
        assert api.request(method, path, token=token, json=body).status_code == 403, (method, path)
    assert Server.objects.get(pk=catalog.github.pk).command == catalog.github.command
    assert not (tmp_path / "x").exists()
    # A held tool is the text a review keeps from all but curators: no longer one, they read what they may discover.
    assert api.get(f"tools/{catalog.held.tool_id}/", token=token).status_code == 404
    # What needs no model permission still works: their own tools and tokens.
    assert api.get("tools/", token=token).status_code == 200
    assert api.get("tokens/", token=token).status_code == 200
