"""A list's column headers wrap between words, never inside one: the learned requests read "CALLER|S" and
"SUCCESSFU|L CALLS" at 1280 and 800 px (adminux32). Django floats a sorted column's priority and arrow beside its
name, and the page's "break a word that would not fit" rule split the name beside them."""

import pytest
from django.contrib.auth.models import Group

from governance.roles import CURATORS
from tests.governance.factories import ServerFactory, ToolFactory

from .conftest import admin_login, learned_by_teachers, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]
# Each word of each header, as the browser laid it out: a word split over two lines has two boxes.
SPLIT_WORDS = """
const split = [];
for (const th of document.querySelectorAll('#result_list thead th .text')) {
  const walker = document.createTreeWalker(th, NodeFilter.SHOW_TEXT);
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    for (const match of node.textContent.matchAll(/\\S+/g)) {
      const range = document.createRange();
      range.setStart(node, match.index);
      range.setEnd(node, match.index + match[0].length);
      if (range.getClientRects().length > 1) split.push(match[0]);
    }
  }
}
return split;
"""
FITS = "const e = document.querySelector('#changelist .results'); return e.scrollWidth <= e.clientWidth;"


def test_the_learned_requests_headers_keep_their_words_whole_at_1280_and_800(browser, live_server, django_user_model):
    curator = django_user_model.objects.create_user(username="cur", password="pw-cur-123", is_staff=True)
    curator.groups.add(Group.objects.get(name=CURATORS))
    tool = ToolFactory(server=ServerFactory(slug="time"), name="get_current_time")
    learned_by_teachers(tool, "time in Tokyo", 1, key="k1")
    admin_login(browser, live_server.url, "cur", "pw-cur-123", path="/admin/search/learnedrequest/")
    for width in (1280, 800):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/search/learnedrequest/")
        assert browser.find_elements("css selector", "#result_list tbody tr")
        screenshot(browser, f"curator-learnedrequest-headers-{width}")
        assert browser.execute_script(SPLIT_WORDS) == [], f"a header breaks inside a word at {width} px"
        assert browser.execute_script(FITS), f"learned requests: the list scrolls sideways at {width} px"
