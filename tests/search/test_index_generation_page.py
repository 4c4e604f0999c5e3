"""An index generation's list row and page in words: whether the build ran degraded ("no", not Django's red cross on
every build) and the tools an incremental build reindexed by name (not "Tool pks: [1, 10]")."""

import re

import pytest
from django.urls import reverse
from django.utils import timezone

from search.choices import GenerationKind, GenerationStatus
from search.models import IndexGeneration
from tests.governance.factories import ServerFactory, ToolFactory

pytestmark = pytest.mark.django_db


def _fields(html: str) -> dict[str, str]:
    """Each read-only field's label and its value's text."""
    rows = re.findall(r"<label>([^<]*):</label>\s*<div class=\"readonly\">(.*?)</div>", html, re.S)
    return {label: re.sub(r"<[^>]+>", "", value).strip() for label, value in rows}


def test_a_generation_says_what_it_reindexed_and_whether_it_ran_degraded(admin_client):
    server = ServerFactory(slug="time")
    now, convert = ToolFactory(server=server, name="get_current_time"), ToolFactory(server=server, name="convert_time")
    ready = {"status": GenerationStatus.READY, "finished_at": timezone.now(), "tool_count": 2}
    full = IndexGeneration.objects.create(kind=GenerationKind.FULL, **ready)
    changed = IndexGeneration.objects.create(kind=GenerationKind.INCREMENTAL, degraded=True,
                                             tool_pks=[now.pk, convert.pk], **ready)  # fmt: skip

    listing = admin_client.get(reverse("admin:search_indexgeneration_changelist")).content.decode()
    cells = re.findall(r'<td class="field-degraded_column">([^<]*)</td>', listing)
    assert cells == ["degraded", ""] and "icon-no.svg" not in listing  # newest first; no red cross for "no"

    page = admin_client.get(reverse("admin:search_indexgeneration_change", args=[changed.pk])).content.decode()
    fields = _fields(page)
    assert fields["Tools reindexed"] == "time::convert_time, time::get_current_time"
    assert f'href="{reverse("admin:catalog_tool_change", args=[now.pk])}"' in page  # each tool linked
    assert fields["Degraded"].startswith("yes: the model was unavailable")
    assert not {"ID", "Tool pks", "Progress done", "Progress total"} & set(fields), sorted(fields)

    fields = _fields(admin_client.get(reverse("admin:search_indexgeneration_change", args=[full.pk])).content.decode())
    assert fields["Tools reindexed"] == "every tool (a full rebuild)" and fields["Degraded"] == "no"
