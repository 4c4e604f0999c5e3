"""Two curators promoting one learned request at once (a list action and its own page, say): its words become one
curated example request of the tool, not two (each a copy the tool's ranking counts, each to be deleted by hand)."""

import threading
import time

import pytest
from django.db import connection, transaction

from search.choices import LearnedStatus
from search.models import LearnedRequest
from search.usage import learned_request_promote
from tests.governance.factories import ServerFactory, ToolFactory


def _until_two_wait_on_locks() -> None:
    """Poll until two sessions wait on a lock (a bound on waiting, not a speed assertion)."""
    deadline = time.monotonic() + 30
    while _waiting_on_locks() < 2:
        assert time.monotonic() < deadline, "the two promotions never both got under way"
        time.sleep(0.05)


def _waiting_on_locks() -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT pg_stat_clear_snapshot()")  # inside a transaction the view is read once otherwise
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND datname = current_database()"
        )
        return cursor.fetchone()[0]


@pytest.mark.django_db(transaction=True)
def test_two_curators_promoting_one_learned_request_at_once_make_one_example(django_user_model):
    if connection.vendor != "postgresql":
        pytest.skip("needs Postgres: both promotions held inside their transactions by a row lock")
    curators = [django_user_model.objects.create_user(username=f"cur{n}", is_staff=True) for n in (1, 2)]
    tool = ToolFactory(server=ServerFactory(slug="mail"), name="list_inbox")
    learned = LearnedRequest.objects.create(tool=tool, text="did my landlord write", key="k1", principal_count=2)

    errors: list[BaseException] = []

    def promote(curator) -> None:
        try:
            learned_request_promote(learned=LearnedRequest.objects.get(pk=learned.pk), actor=curator)
        except BaseException as exc:  # noqa: BLE001 - asserted below
            errors.append(exc)
        finally:
            connection.close()

    with transaction.atomic():
        LearnedRequest.objects.select_for_update().get(pk=learned.pk)  # the row both promotions write
        threads = [threading.Thread(target=promote, args=(curator,)) for curator in curators]
        for thread in threads:
            thread.start()
        _until_two_wait_on_locks()
    for thread in threads:
        thread.join(timeout=30)

    assert not errors, errors
    assert list(tool.examples.values_list("text", flat=True)) == ["did my landlord write"]
    learned.refresh_from_db()
    assert learned.status == LearnedStatus.PROMOTED
