"""mend2: ``POST /api/v1/servers/<slug>/sync/`` with tasks in-process (the embedded default, the demo) answered 500
when Scout itself failed during the sync (an internal error, not the upstream's), though the run and the server were
recorded (mend1). It answers as the admin does: 202 with its run, failed with the reason; the traceback logged once.
Real HTTP with an API token, a real stdio server, the database refusing new tools (mend1's trigger)."""

import logging
import sys
from pathlib import Path

import pytest

from catalog.models import Server
from tests.api.conftest import api_db, give_perms, make_token
from tests.governance.admin.test_first_sync_internal_error import REFUSED, tools_refused  # noqa: F401 - the fixture

pytestmark = [api_db, pytest.mark.slow]


def test_a_sync_scout_failed_answers_202_with_its_failed_run(api, owner, tools_refused, caplog):  # noqa: F811
    give_perms(owner, "catalog.view_server", "catalog.change_server", "catalog.view_syncrun")
    token = make_token(owner, ["api"])
    command = str(Path(sys.executable).parent / "mcp-server-time")  # installed from requirements.txt
    args = ["--local-timezone", "UTC"]
    Server.objects.create(slug="clock", name="Clock", transport="stdio", command=command, args=args)
    with caplog.at_level(logging.ERROR):
        response = api.post("servers/clock/sync/", token=token)
    assert response.status_code == 202, response.text
    run = response.json()["sync_run"]
    assert run["status"] == "failed" and run["server"] == "clock"
    assert run["error"].startswith("internal error while saving the listing") and REFUSED in run["error"]
    server = api.get("servers/clock/", token=token).json()
    assert (server["status"], server["last_error"]) == ("unavailable", run["error"])
    tracebacks = [record for record in caplog.records if record.exc_info and REFUSED in str(record.exc_info[1])]
    assert len(tracebacks) == 1, [(record.name, record.getMessage()) for record in tracebacks]
