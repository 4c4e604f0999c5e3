"""Index generation rows are pruned after each build: the newest SCOUT_SEARCH_GENERATIONS_KEPT stay, with any
still building and the full builds of the Weaviate rollback window; a serving process whose generation was pruned
keeps answering from its snapshot and then reads the index whole, missing no change."""

from unittest import mock

import pytest

from search.backends import SearchRequest
from search.backends.embedded import EmbeddedBackend
from search.choices import GenerationKind
from search.models import IndexGeneration
from search.services import index_rebuild, index_update

from .factories import ToolFactory

pytestmark = [pytest.mark.django_db, pytest.mark.slow]


def _ids() -> list[int]:
    return sorted(IndexGeneration.objects.values_list("id", flat=True))


def test_builds_past_the_limit_leave_the_newest_the_building_and_the_rollback_window(
    small_catalog, reindex, encoder, settings
):
    settings.SCOUT_SEARCH_GENERATIONS_KEPT = 3
    settings.SCOUT_WEAVIATE_KEEP_PREVIOUS = 0
    server = small_catalog["send_email"].server
    first_full = reindex(index_rebuild).pk
    building = IndexGeneration.objects.create(kind=GenerationKind.INCREMENTAL).pk  # a build still running
    updates = [
        reindex(index_update, tool_pks=[ToolFactory(server=server, name=f"send_fax_{i}").pk]).pk for i in range(5)
    ]
    # The newest three, the one still building, and the latest full build (the one the collection holds).
    assert _ids() == sorted([first_full, building, *updates[-3:]])

    settings.SCOUT_WEAVIATE_KEEP_PREVIOUS = 1  # a rollback window of one previous collection
    second_full = reindex(index_rebuild).pk
    assert _ids() == sorted([first_full, building, updates[-2], updates[-1], second_full])

    settings.SCOUT_WEAVIATE_KEEP_PREVIOUS = 0
    last = reindex(index_update, tool_pks=[updates[0]]).pk
    assert _ids() == sorted([building, updates[-1], second_full, last])


def test_a_process_whose_generation_is_pruned_keeps_answering_and_misses_no_change(
    small_catalog, reindex, encoder, settings
):
    settings.SCOUT_SEARCH_GENERATIONS_KEPT = 2
    server = small_catalog["send_email"].server
    served = {"token": str(reindex(index_rebuild).token)}
    visible = {tool.pk for tool in small_catalog.values()}
    query = "send a fax"
    request = SearchRequest(
        query=query, visible=visible, top_k=5, fusion="convex", query_vector=encoder.encode([query])[0]
    )
    other = EmbeddedBackend()  # a serving process that hears of generations through the database only
    with mock.patch("search.backends.embedded.current_generation_token", lambda: served["token"]):
        before = other.search(request)
        assert before.matches and before.generation == served["token"]
        served["token"] = str(reindex(index_update, tool_pks=[ToolFactory(server=server, name="send_fax").pk]).token)
        assert other.search(request).generation == served["token"]  # updated to the fax tool's generation
        builds = other.builds
        added = []
        for name in ("send_telex", "send_pager", "send_postcard", "send_pigeon"):
            tool = ToolFactory(server=server, name=name, description=f"Send a {name[5:]}.")
            added.append(tool.pk)
            reindex(index_update, tool_pks=[tool.pk])
            # The process has not looked for a new generation yet: it answers from its snapshot while the
            # generation it is at is pruned under it.
            during = other.search(request)
            assert during.matches and during.generation == served["token"]
        assert not IndexGeneration.objects.filter(token=served["token"]).exists()  # its generation is gone
        served["token"] = str(IndexGeneration.objects.order_by("-id").first().token)
        after = other.search(request)
    assert after.generation == served["token"] and after.matches
    assert set(added) <= {int(pk) for pk in other.snapshot().pks}  # every pruned generation's tools, none missed
    assert (other.builds, other.updates) == (builds + 1, 1)  # read whole: its changes cannot be known
