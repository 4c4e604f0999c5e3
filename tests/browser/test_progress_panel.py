"""An operator watches an index build in a real browser: the generation's page shows texts encoded of
the total and refreshes itself (no reload) until the build ends, then shows its duration."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from search import encoder as encoder_module
from search.models import IndexGeneration
from search.services import index_rebuild

from .conftest import POLL, admin_login, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow, pytest.mark.timeout(240)]


def test_generation_page_follows_a_running_build(browser, live_server, admin_user, small_catalog, encoder, monkeypatch):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    monkeypatch.setattr(encoder_module, "PROGRESS_CHUNK", 8)  # several steps for a small catalog
    pauses = [threading.Event(), threading.Event()]
    resumes = [threading.Event(), threading.Event()]
    seen: list[tuple[int, int]] = []

    def hold(done: int, total: int) -> None:
        step = len(seen)
        if 0 < done < total and step < len(pauses):
            seen.append((done, total))
            pauses[step].set()
            resumes[step].wait(120)

    def build() -> None:
        try:
            index_rebuild(progress=hold)
        finally:
            for event in (*pauses, *resumes):
                event.set()
            connection.close()

    thread = threading.Thread(target=build)
    thread.start()
    try:
        assert pauses[0].wait(120)
        generation = IndexGeneration.objects.get()
        admin_login(
            browser, live_server.url, "admin", "password", path=f"/admin/search/indexgeneration/{generation.pk}/change/"
        )
        text = browser.find_element(By.CSS_SELECTOR, ".scout-progress-text")
        done, total = seen[0]
        WebDriverWait(browser, 30, POLL).until(lambda _: f"{done} of {total} texts" in text.text)
        assert "left" in text.text and "encoding" in text.text
        assert browser.find_element(By.CSS_SELECTOR, ".scout-progress-bar").is_displayed()
        screenshot(browser, "admin-index-build-running")

        resumes[0].set()
        assert pauses[1].wait(120)
        done, total = seen[1]
        # The same element, so the page was not reloaded: the poll rewrote it.
        WebDriverWait(browser, 30, POLL).until(lambda _: f"{done} of {total} texts" in text.text)
        screenshot(browser, "admin-index-build-running-later")

        resumes[1].set()
        WebDriverWait(browser, 30, POLL).until(lambda _: text.text.startswith("ready in"))
        assert not browser.find_element(By.CSS_SELECTOR, ".scout-progress-bar").is_displayed()
        screenshot(browser, "admin-index-build-finished")
    finally:
        for event in resumes:
            event.set()
        thread.join(120)
