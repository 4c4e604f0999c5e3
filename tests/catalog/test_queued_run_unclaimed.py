"""mend4: a queued sync run whose task the broker lost after it was sent (Redis restarted without persistence, its
queue flushed) stayed ``queued`` for ever: nothing swept it. The beat's ``close_dead_sync_runs`` now closes a queued
run no worker took within the broker's visibility timeout (and its restore interval) plus a margin, as failed with a
reason telling the operator to ask again; never a younger one, nor one whose task the outbox still keeps."""

from datetime import timedelta

import pytest
from django.utils import timezone

from catalog.choices import SyncStatus
from catalog.models import QueuedTask, Server, SyncRun
from catalog.services.runs import sync_run_queue
from catalog.tasks import close_dead_sync_runs, queued_unclaimed_seconds, sync_server


@pytest.mark.django_db
def test_the_beat_fails_a_queued_run_no_worker_took_but_not_a_younger_one_nor_one_the_outbox_keeps(django_user_model):
    operator_user = django_user_model.objects.create_user("oli")
    server = Server.objects.create(slug="clock", name="Clock", transport="stdio", command="mcp-server-time")
    bound = queued_unclaimed_seconds()
    assert bound > 3600  # past the default visibility timeout: a live task is delivered again before it
    lost, young, kept = (sync_run_queue(server=server, source="admin", started_by_id=operator_user.pk) for _ in "abc")
    now = timezone.now()
    SyncRun.objects.filter(pk__in=[lost.pk, kept.pk]).update(started_at=now - timedelta(seconds=bound + 5))
    SyncRun.objects.filter(pk=young.pk).update(started_at=now - timedelta(seconds=bound - 60))
    # What the outbox keeps for a sync Redis refused (catalog.tasks._queued_send, outbox_record): its run's pk last.
    QueuedTask.objects.create(
        task_id="kept-1", name=sync_server.name, args=[server.pk, "admin", operator_user.pk, kept.pk]
    )

    assert close_dead_sync_runs() == 1
    assert close_dead_sync_runs() == 0  # closed once
    runs = {run.pk: run for run in SyncRun.objects.filter(server=server)}
    assert runs[lost.pk].status == SyncStatus.FAILED and runs[lost.pk].finished_at is not None
    assert runs[lost.pk].error == (
        f"not run: no worker took this sync within {bound // 60} min of its queueing (the broker lost the task, or no"
        " worker is running); ask for the sync again"
    )
    assert "\n" not in runs[lost.pk].error
    assert (runs[young.pk].status, runs[young.pk].error, runs[young.pk].finished_at) == (SyncStatus.QUEUED, "", None)
    assert (runs[kept.pk].status, runs[kept.pk].finished_at) == (SyncStatus.QUEUED, None)
    assert Server.objects.get(pk=server.pk).last_error == ""  # the server is untouched: nothing ran
