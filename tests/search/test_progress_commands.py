"""search_rebuild and scout_eval show their progress: a bar on a terminal (stderr), plain lines
otherwise, nothing at --verbosity 0; the generation row records the same count."""

import json
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command

from search.models import IndexGeneration
from search.services import index_rebuild
from tests.progress_streams import TTY, assert_bar_finished, assert_plain_lines

from .test_scout_eval import CATALOG, QUERIES

pytestmark = pytest.mark.usefixtures("encoder")


@pytest.fixture(autouse=True)
def no_ci(monkeypatch):
    monkeypatch.delenv("CI", raising=False)


def _texts_to_encode(django_capture_on_commit_callbacks) -> int:
    """The texts a first build encodes, counted by the service's own callback."""
    seen: list[tuple[int, int]] = []
    with django_capture_on_commit_callbacks(execute=True):
        index_rebuild(progress=lambda done, total: seen.append((done, total)))
    assert seen[-1][0] == seen[-1][1] > 0
    return seen[-1][1]


@pytest.mark.django_db
def test_search_rebuild_draws_a_bar_on_a_terminal(small_catalog, django_capture_on_commit_callbacks):
    out, err = StringIO(), TTY()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("search_rebuild", stdout=out, stderr=err)
    generation = IndexGeneration.objects.get()
    assert generation.progress_total == generation.progress_done > 0
    assert_bar_finished(err.getvalue(), generation.progress_total, "texts")
    assert out.getvalue().startswith(f"generation {generation.pk} ")


@pytest.mark.django_db
def test_search_rebuild_writes_plain_lines_off_a_terminal(small_catalog, django_capture_on_commit_callbacks):
    out, err = StringIO(), StringIO()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("search_rebuild", stdout=out, stderr=err)
    total = IndexGeneration.objects.get().progress_total
    assert_plain_lines(err.getvalue(), "encoding", total, "texts")

    err = TTY()  # --no-progress on a terminal: plain lines too (nothing left to encode now)
    call_command("search_rebuild", "--no-progress", stdout=StringIO(), stderr=err)
    assert err.getvalue() == "encoding: nothing to do\n"


@pytest.mark.django_db
def test_search_rebuild_verbosity_zero_prints_nothing(small_catalog, django_capture_on_commit_callbacks):
    out, err = TTY(), TTY()
    with django_capture_on_commit_callbacks(execute=True):
        call_command("search_rebuild", verbosity=0, stdout=out, stderr=err)
    assert IndexGeneration.objects.get().progress_done > 0
    assert out.getvalue() == err.getvalue() == ""


def _eval_files(tmp_path: Path) -> list[str]:
    catalog, queries = tmp_path / "catalog.jsonl", tmp_path / "queries.jsonl"
    catalog.write_text("".join(json.dumps(r) + "\n" for r in CATALOG))
    queries.write_text("".join(json.dumps(r) + "\n" for r in QUERIES))
    return ["--catalog", str(catalog), "--queries", str(queries)]


def test_scout_eval_draws_encoding_and_evaluating_bars(tmp_path, settings):
    settings.SCOUT_SEARCH_EVAL_CACHE_DIR = str(tmp_path / "cache")
    out, err = StringIO(), TTY()
    call_command("scout_eval", *_eval_files(tmp_path), "--json", str(tmp_path / "r.json"), stdout=out, stderr=err)
    report = json.loads((tmp_path / "r.json").read_text())
    encoding, evaluating = err.getvalue().split("evaluating:", 1)
    assert_bar_finished(encoding, report["texts_encoded"], "texts")
    assert_bar_finished(evaluating, report["n_queries"], "queries")
    assert out.getvalue().startswith("tools=4 queries=4")


def test_scout_eval_plain_lines_and_silence(tmp_path, settings):
    settings.SCOUT_SEARCH_EVAL_CACHE_DIR = str(tmp_path / "cache")
    err = StringIO()
    call_command("scout_eval", *_eval_files(tmp_path), stdout=StringIO(), stderr=err)
    assert_plain_lines(err.getvalue(), "evaluating", 4, "queries")
    assert "encoding: started" in err.getvalue()

    out, err = TTY(), TTY()
    call_command("scout_eval", *_eval_files(tmp_path), verbosity=0, stdout=out, stderr=err)
    assert out.getvalue() == err.getvalue() == ""
