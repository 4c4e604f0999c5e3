"""catalog.progress: the bar on a terminal, plain lines elsewhere, the row throttle and the estimate."""

from datetime import timedelta
from io import StringIO

from django.utils import timezone

from catalog.progress import ProgressSum, progress_estimate, progress_reporter, progress_throttled
from tests.progress_streams import TTY, assert_bar_finished, assert_plain_lines


def test_plain_lines_every_ten_percent_without_a_terminal(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    out = StringIO()
    with progress_reporter(out, "work", unit="items") as progress:
        for done in range(0, 201):
            progress(done, 200)
    lines = out.getvalue().splitlines()
    assert lines[1:-1] == [f"work: {p}% ({p * 2}/200 items)" for p in range(10, 100, 10)]
    assert_plain_lines(out.getvalue(), "work", 200, "items")


def test_bar_on_a_terminal(monkeypatch):
    monkeypatch.delenv("CI", raising=False)
    out = TTY()
    with progress_reporter(out, "work", unit="items") as progress:
        for done in range(0, 51):
            progress(done, 50)
    assert_bar_finished(out.getvalue(), 50, "items")
    assert "work: started" not in out.getvalue()


def test_ci_and_no_progress_give_plain_lines_even_on_a_terminal(monkeypatch):
    monkeypatch.setenv("CI", "true")
    out = TTY()
    with progress_reporter(out, "work", unit="items") as progress:
        progress(0, 3)
        progress(3, 3)
    assert_plain_lines(out.getvalue(), "work", 3, "items")

    monkeypatch.delenv("CI")
    out = TTY()
    with progress_reporter(out, "work", unit="items", disabled=True) as progress:
        progress(0, 3)
        progress(3, 3)
    assert_plain_lines(out.getvalue(), "work", 3, "items")


def test_quiet_prints_nothing():
    out = TTY()
    with progress_reporter(out, "work", quiet=True) as progress:
        progress(0, 3)
        progress(3, 3)
    assert out.getvalue() == ""


def test_throttle_keeps_first_last_and_five_percent_steps():
    seen = []
    # min_seconds far beyond the test: only the fraction and the ends let a report through.
    record = progress_throttled(lambda done, total: seen.append(done), min_seconds=3600, min_fraction=0.05)
    for done in range(0, 1001):
        record(done, 1000)
    assert seen == list(range(0, 1001, 50))

    seen.clear()  # the last report always goes through, however close to the previous one
    record = progress_throttled(lambda done, total: seen.append(done), min_seconds=3600, min_fraction=0.5)
    for done in (0, 3, 7, 10):
        record(done, 10)
    assert seen == [0, 7, 10]


def test_sum_of_calls_is_one_running_count():
    seen = []
    total = ProgressSum(lambda done, total: seen.append((done, total)))
    first = total.part()
    first(2, 4)
    first(4, 4)
    second = total.part()
    second(3, 3)
    assert seen == [(2, 4), (4, 4), (7, 7)]


def test_estimate_from_the_rate_so_far():
    started = timezone.now() - timedelta(seconds=10)
    now = started + timedelta(seconds=10)
    assert progress_estimate(done=25, total=100, started_at=started, now=now) == 30.0
    assert progress_estimate(done=0, total=100, started_at=started, now=now) is None
    assert progress_estimate(done=100, total=100, started_at=started, now=now) == 0.0
