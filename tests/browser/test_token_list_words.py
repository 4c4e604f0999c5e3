"""mend1: at 800 px beside the navigation, the token list split words mid-word ("adm|in" in the user column, which
could break anywhere): every cell wraps between words or the parts of a name (a long person's or agent's name too),
never inside one, and the list still fits."""

import pytest

from governance.services.tokens import api_token_create
from tests.governance.factories import agent_of, in_days

from .conftest import admin_login, screenshot
from .test_names_whole import FITS, _mid_word_breaks

pytestmark = pytest.mark.django_db(transaction=True)


def test_the_token_list_wraps_whole_words_at_800_and_1280_px(browser, live_server, django_user_model):
    admin = django_user_model.objects.create_superuser(username="admin", password="pw-admin-123")
    agent = agent_of(admin, "demo-client", all_user_tools=True)
    person = django_user_model.objects.create_user(username="konstantinopoulou.alexandra")
    for owner, name, owner_agent, scopes in (
        (admin, "demo 2026-12-07 16:47", agent, ["discover", "execute"]),
        (admin, "ci", None, ["discover", "execute", "api"]),
        (person, "triage", agent_of(person, "CustomerSupportTriageAssistant"), ["discover"]),
    ):
        api_token_create(user=owner, name=name, agent=owner_agent, scopes=scopes, expires_at=in_days(7))

    admin_login(browser, live_server.url, "admin", "pw-admin-123")
    for width in (1280, 800):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/governance/apitoken/")
        screenshot(browser, f"token-list-{width}")
        broken = [
            (cell.get_attribute("class"), split)
            for cell in browser.find_elements("css selector", "#result_list tbody td, #result_list tbody th")
            for split in _mid_word_breaks(browser, cell)
        ]
        assert broken == [], width
        assert browser.execute_script(FITS), f"the token list scrolls sideways at {width} px"
