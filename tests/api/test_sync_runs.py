"""/api/v1/sync-runs/: list (filters, pagination) and read, for users with catalog.view_syncrun."""

from django.utils import timezone

from tests.api.conftest import api_db, error_of, give_perms, make_token

pytestmark = api_db


def _runs(catalog):
    from catalog.models import SyncRun

    now = timezone.now()
    SyncRun.objects.create(server=catalog.github, status="success", started_at=now, source="beat")
    SyncRun.objects.create(server=catalog.github, status="failed", started_at=now, source="api:x", error="boom")
    return SyncRun.objects.create(server=catalog.payroll, status="success", started_at=now, source="beat")


def test_list_filter_and_read(api, catalog, owner):
    give_perms(owner, "catalog.view_syncrun")
    last = _runs(catalog)
    token = make_token(owner, ["api"])
    body = api.get("sync-runs/?page_size=2", token=token).json()
    assert body["count"] == 3 and len(body["results"]) == 2 and body["next"]
    assert api.get("sync-runs/?server=github", token=token).json()["count"] == 2
    failed = api.get("sync-runs/?status=failed", token=token).json()["results"]
    assert [(r["server"], r["error"]) for r in failed] == [("github", "boom")]
    assert api.get("sync-runs/?source=api:x", token=token).json()["count"] == 1
    one = api.get(f"sync-runs/{last.pk}/", token=token)
    assert one.status_code == 200 and one.json()["server"] == "payroll"
    assert api.get("sync-runs/999999/", token=token).status_code == 404


def test_unknown_status_is_refused_not_an_empty_list(api, catalog, owner):
    """A mistyped status ("failure" for "failed") must not read as "no failed runs"."""
    give_perms(owner, "catalog.view_syncrun")
    _runs(catalog)
    token = make_token(owner, ["api"])
    response = api.get("sync-runs/?status=failure", token=token)
    assert response.status_code == 400
    allowed = "queued, running, success, partial, failed, skipped"
    assert error_of(response)["fields"] == {"status": [f"must be one of: {allowed}"]}


def test_needs_view_permission(api, catalog, member):
    last = _runs(catalog)
    token = make_token(member, ["api", "discover"])
    for path in ("sync-runs/", f"sync-runs/{last.pk}/"):
        response = api.get(path, token=token)
        assert response.status_code == 403 and error_of(response)["code"] == "permission_denied"


def test_server_limited_token(api, catalog, owner):
    give_perms(owner, "catalog.view_syncrun")
    _runs(catalog)
    token = make_token(owner, ["api", "server:payroll"])
    assert [r["server"] for r in api.get("sync-runs/", token=token).json()["results"]] == ["payroll"]
