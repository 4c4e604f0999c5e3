"""A person's or agent's name in the audit trail and the approval inbox wraps only between its parts (after "." or
"_", before a capital of camelCase), never mid-word, at 1280 px and at 800 px beside the navigation: the audit trail
split "konsta|ntinopo|ulou.al|exandr|a", and "CustomerSupportTriageAssistant" in a column of its own pushed the
columns after it out of view (the agent is now under its person, as in the inbox)."""

import pytest

from governance.services.approvals import approval_request_create
from governance.services.audit import audit_record
from governance.services.tokens import api_token_create, api_token_verify
from tests.governance.factories import agent_of, in_days

from .conftest import admin_login, approver_and_tool, screenshot

pytestmark = pytest.mark.django_db(transaction=True)

PERSON, AGENT = "konstantinopoulou.alexandra", "CustomerSupportTriageAssistant"
FITS = "const e = document.querySelector('#changelist .results'); return e.scrollWidth <= e.clientWidth;"
# The text of an element and, per character, the top of the line it is drawn on (a <br>: a line break, no top).
LINES = """
const walker = document.createTreeWalker(arguments[0], NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT);
let text = '', tops = [];
while (walker.nextNode()) {
  const node = walker.currentNode;
  if (node.nodeName === 'BR') { text += '\\n'; tops.push(null); }
  if (node.nodeType !== Node.TEXT_NODE) continue;
  for (let i = 0; i < node.length; i++) {
    const range = document.createRange();
    range.setStart(node, i); range.setEnd(node, i + 1);
    const rect = range.getClientRects()[0];
    text += node.data[i]; tops.push(rect ? Math.round(rect.top) : null);
  }
}
return [text, tops];
"""


def _mid_word_breaks(browser, element) -> list[str]:
    """Where ``element``'s text starts a new line other than between the parts of a name: "konsta|ntinopoulou"."""
    text, tops = browser.execute_script(LINES, element)
    bad = []
    for i in range(1, len(text)):
        if tops[i] is None or tops[i - 1] is None or tops[i] <= tops[i - 1]:
            continue
        before, after = text[i - 1], text[i]
        if before in "._@/- " or after == " " or (before.islower() and after.isupper()):
            continue
        bad.append(f"{text[:i]}|{text[i:]}")
    return bad


def test_people_and_agents_wrap_between_the_parts_of_their_names(browser, live_server, django_user_model):
    person = django_user_model.objects.create_user(username=PERSON)
    tool = approver_and_tool(django_user_model, person, server="weather", tool="send_weather_alert")
    _, raw = api_token_create(
        user=person,
        name="triage",
        agent=agent_of(person, AGENT, all_user_tools=True),
        scopes=["discover", "execute"],
        expires_at=in_days(2),
    )
    principal = api_token_verify(raw)
    audit_record(event_type="execution", principal=principal, tool=tool, outcome="error")
    approval_request_create(principal=principal, tool=tool, arguments={"region": "Bavaria", "severity": "extreme"})

    pages = (
        (
            "root",
            "pw-root-123",
            "governance/auditevent/?event_type__exact=execution",
            (".field-subject",),
        ),
        ("appr", "pw-appr-123", "governance/approvalrequest/", (".field-requester_column",)),
    )
    for username, password, page, cells in pages:
        browser.delete_all_cookies()
        admin_login(browser, live_server.url, username, password)
        for width in (1280, 800):
            browser.set_window_size(width, 900)
            browser.get(f"{live_server.url}/admin/{page}")
            row = browser.find_element("css selector", "#result_list tbody tr")
            browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", row)
            screenshot(browser, f"names-whole-{page.split('/')[1]}-{width}")
            for css in cells:
                cell = row.find_element("css selector", css)
                # the agent under its person (in the inbox, then when they asked)
                assert cell.text.replace("\n", "").startswith(f"{PERSON}via {AGENT}"), (page, css)
                assert _mid_word_breaks(browser, cell) == [], (page, width, css)
            assert browser.execute_script(FITS), f"{page} scrolls sideways at {width} px"
