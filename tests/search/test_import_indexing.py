"""catalog_import and the search index: one reindex per import batch, or none with --no-index (rebuild later)."""

import json

import pytest
from django.core.management import call_command

from catalog.models import Tool
from search.choices import GenerationKind
from search.models import IndexGeneration, ToolEmbedding

pytestmark = pytest.mark.django_db


def _catalog(tmp_path, description: str = "Append a line to a note."):
    lines = [
        {"server": server, "name": name, "description": f"{description} ({server} {name})"}
        for server in ("notes", "journal")
        for name in ("append", "read")
    ]
    path = tmp_path / "catalog.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_import_reindexes_once_per_batch_and_a_reimport_encodes_nothing(
    tmp_path, encoder, django_capture_on_commit_callbacks
):
    path = _catalog(tmp_path)
    with django_capture_on_commit_callbacks(execute=True):
        call_command("catalog_import", str(path))
    generation = IndexGeneration.objects.get()
    assert (generation.kind, generation.tool_count, generation.encoded) == (GenerationKind.INCREMENTAL, 4, 4)

    with django_capture_on_commit_callbacks(execute=True):
        call_command("catalog_import", str(path))
    assert IndexGeneration.objects.count() == 1  # nothing changed, nothing to reindex


def test_no_index_skips_the_reindex_until_search_rebuild(tmp_path, encoder, django_capture_on_commit_callbacks, capsys):
    with django_capture_on_commit_callbacks(execute=True):
        call_command("catalog_import", "--no-index", str(_catalog(tmp_path)))
    assert Tool.objects.count() == 4
    assert not IndexGeneration.objects.exists() and not ToolEmbedding.objects.exists()
    assert "search_rebuild" in capsys.readouterr().out

    with django_capture_on_commit_callbacks(execute=True):
        call_command("search_rebuild")
    generation = IndexGeneration.objects.get()
    assert (generation.kind, generation.tool_count, generation.encoded) == (GenerationKind.FULL, 4, 4)
