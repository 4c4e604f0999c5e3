"""The operator's day: the dashboard's searches lead to what agents' searches returned per backend and server (counts
and times, never the words, which are the curators'), readable at 1280 and 800 px."""

import pytest
from django.contrib.auth.models import Group
from selenium.webdriver.common.by import By

from governance.roles import OPERATORS
from tests.scoutsite.test_dashboard import seed_traffic

from .conftest import admin_login, click_through, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
FITS = "return document.documentElement.scrollWidth <= document.documentElement.clientWidth;"


def test_operator_opens_the_searches_tile_and_reads_each_backend_and_server(
    browser, live_server, django_user_model, member
):
    operator = django_user_model.objects.create_user(username="op", password="pw-op-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    seed_traffic(member)  # four searches listing calc::add ("q"), one withheld; calls of calc, time and faulty
    admin_login(browser, live_server.url, "op", "pw-op-123", path="/admin/dashboard/?window=1h")
    # The tile was a bare number for an operator (the query log is not theirs): it now opens the searches' figures.
    click_through(browser, browser.find_element(By.CSS_SELECTOR, "#tile-searches a"))
    assert browser.find_element(By.TAG_NAME, "h1").text == "Searches by backend and server"
    backend = browser.find_element(By.CSS_SELECTOR, '#search-backends tr[data-backend="embedded"]').text
    assert backend.split() == ["embedded", "4", "1", "(25%)", "1", "(25%)", "0", "25", "/", "39", "ms"], backend
    calc = browser.find_element(By.CSS_SELECTOR, '#search-servers tr[data-server="calc"]').text.split()
    assert calc[:4] == ["calc", "4", "4", "1"], calc  # every answer listed calc::add first, one low-confidence
    faulty = browser.find_element(By.CSS_SELECTOR, '#search-servers tr[data-server="faulty"]')
    # Its failed call opens in the audit trail.
    click_through(browser, faulty.find_element(By.CSS_SELECTOR, 'td[data-label="Failed"] a'))
    assert "/admin/governance/auditevent/" in browser.current_url and "faulty%3A%3A" in browser.current_url
    assert "1 audit event" in browser.find_element(By.ID, "changelist").text
    browser.back()
    # The navigation leads here too, beside the dashboard (an operator looking for searches reads the sidebar).
    nav = browser.find_element(By.CSS_SELECTOR, '#nav-sidebar a[href="/admin/searches/"]')
    assert nav.text == "Searches"
    current = browser.find_elements(By.CSS_SELECTOR, "#nav-sidebar tr.current-model")
    assert [row.text for row in current] == ["Searches"]  # not the dashboard too
    screenshot(browser, "operator-searches-1280")
    # At 800 px beside the navigation, each server is a card of labelled lines: nothing past the window's edge.
    browser.set_window_size(800, 900)
    assert browser.execute_script(FITS), "the searches page scrolls sideways at 800 px"
    label = browser.execute_script(
        "return getComputedStyle(document.querySelector('#search-servers td[data-label=\"Failed\"]'), '::before')"
        ".content;"
    )
    assert label == '"Failed: "', label
    screenshot(browser, "operator-searches-800")
    browser.set_window_size(1280, 900)
