"""tool_curation_update: curated columns only, curated_at, tools_changed after commit."""

import pytest
from django.core.exceptions import ValidationError
from django.utils import timezone

from catalog.choices import Transport
from catalog.models import Server, Tool
from catalog.services.curation import tool_curation_update
from catalog.signals import tools_changed

pytestmark = pytest.mark.django_db


@pytest.fixture
def tool() -> Tool:
    server = Server.objects.create(slug="docs", name="Docs", transport=Transport.IMPORTED)
    now = timezone.now()
    return Tool.objects.create(
        server=server,
        name="page_get",
        tool_id="docs::page_get",
        description="Read a page.",
        input_schema={"type": "object"},
        definition_hash="a" * 64,
        first_seen_at=now,
        last_seen_at=now,
    )


@pytest.fixture
def signals():
    received: list[list[int]] = []

    def receiver(sender, tool_pks, **kwargs):
        received.append(list(tool_pks))

    tools_changed.connect(receiver)
    yield received
    tools_changed.disconnect(receiver)


def test_writes_curation_and_signals_after_commit(tool, signals, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        changed = tool_curation_update(tool=tool, title="Read a page", entity_types=["page"], phrases_changed=True)
    assert changed is True
    tool.refresh_from_db()
    assert (tool.title, tool.entity_types) == ("Read a page", ["page"])
    assert tool.curated_at is not None
    assert signals == [[tool.pk]]


def test_no_change_is_a_no_op(tool, signals, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert tool_curation_update(tool=tool, title="", purpose="", enabled=True, related_tools=[]) is False
    tool.refresh_from_db()
    assert tool.curated_at is None
    assert signals == []


def test_disabling_signals_without_marking_curated(tool, signals, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert tool_curation_update(tool=tool, enabled=False) is True
    tool.refresh_from_db()
    assert tool.enabled is False and tool.curated_at is None
    assert signals == [[tool.pk]]


def test_never_overwrites_upstream_fields_written_meanwhile(tool):
    stale = Tool.objects.get(pk=tool.pk)
    Tool.objects.filter(pk=tool.pk).update(description="Read a page (v2).", definition_hash="b" * 64)
    tool_curation_update(tool=stale, purpose="Look up documentation pages.")
    tool.refresh_from_db()
    assert tool.purpose == "Look up documentation pages."
    assert (tool.description, tool.definition_hash) == ("Read a page (v2).", "b" * 64)


def test_related_tools_exclude_the_tool_itself(tool):
    other = Tool.objects.create(
        server=tool.server,
        name="page_list",
        tool_id="docs::page_list",
        definition_hash="c" * 64,
        input_schema={"type": "object"},
        first_seen_at=tool.first_seen_at,
        last_seen_at=tool.last_seen_at,
    )
    assert tool_curation_update(tool=tool, related_tools=[tool, other]) is True
    assert list(tool.related_tools.all()) == [other]


def test_invalid_value_raises_and_stores_nothing(tool):
    with pytest.raises(ValidationError):
        tool_curation_update(tool=tool, title="x" * 201)
    tool.refresh_from_db()
    assert tool.title == "" and tool.curated_at is None
