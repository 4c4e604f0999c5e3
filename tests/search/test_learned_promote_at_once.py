"""Two curators promoting one learned request at once (a list action and its own page, say): its words become one
curated example request of the tool, not two (each a copy the tool's ranking counts, each to be deleted by hand)."""

import threading

import pytest
from django.db import connection, transaction

from search.choices import LearnedStatus
from search.models import LearnedRequest
from search.usage import learned_request_promote
from tests.governance.factories import ServerFactory, ToolFactory
from tests.postgres_locks import until_sessions_wait_on_locks


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
        until_sessions_wait_on_locks(2, "both promotions are under way")
    for thread in threads:
        thread.join(timeout=30)

    assert not errors, errors
    assert list(tool.examples.values_list("text", flat=True)) == ["did my landlord write"]
    learned.refresh_from_db()
    assert learned.status == LearnedStatus.PROMOTED
