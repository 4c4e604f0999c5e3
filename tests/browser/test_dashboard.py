"""The operators' dashboard renders its charts in a real browser, with data from a test run."""

import re

import pytest
from django.contrib.auth.models import Permission

from tests.scoutsite.test_dashboard import seed_traffic

from .conftest import admin_login, click_through, screenshot

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_dashboard_charts_render(browser, live_server, django_user_model, member):
    operator = django_user_model.objects.create_user(username="operator", password="pw-operator-123", is_staff=True)
    operator.user_permissions.add(Permission.objects.get(codename="view_server", content_type__app_label="catalog"))
    seed_traffic(member)
    admin_login(browser, live_server.url, "operator", "pw-operator-123", path="/admin/dashboard/?window=1h")
    charts = browser.execute_script(
        "return Object.fromEntries(Object.entries(window.scoutDashboardCharts || {}).map("
        "([id, c]) => [id, c.data.datasets.reduce((n, d) => n + d.data.filter(v => v).length, 0)]))"
    )
    assert set(charts) == {
        "chart-traffic", "chart-latency", "chart-tools", "chart-failures", "chart-servers",
    }  # fmt: skip
    # No sync ran in the window: a sentence instead of an empty doughnut.
    assert "No sync runs in the last hour" in browser.find_element("id", "chart-syncs-empty").text
    assert charts["chart-traffic"] > 0 and charts["chart-tools"] == 2 and charts["chart-failures"] == 1
    # Something was drawn: the traffic canvas is not blank.
    drawn = browser.execute_script(
        "const c = document.getElementById('chart-traffic');"
        "const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;"
        "let n = 0; for (let i = 3; i < d.length; i += 4) { if (d[i] > 0) n++; } return n;"
    )
    assert drawn > 500
    assert "4" in browser.find_element("id", "tile-searches").text
    # The time axis on the admin's 24-hour clock and zone, named (the browser's locale drew "03:28 PM").
    axis = browser.execute_script(
        "const c = window.scoutDashboardCharts['chart-traffic']; return [c.data.labels, c.options.scales.x.title.text];"
    )
    assert all(re.fullmatch(r"[0-2]\d:[0-5]\d", label) for label in axis[0]) and axis[1] == "time (UTC)", axis
    # The calls charts name their unit and period (adminux33: "Top tools" had an axis of 0..1 and no unit).
    titles = browser.execute_script(
        "const c = window.scoutDashboardCharts;"
        "return ['chart-tools', 'chart-failures'].map(id => c[id].options.scales.x.title.text);"
    )
    assert titles == ["successful calls in the last hour", "failed calls in the last hour"], titles
    # The searches' latency reads beside the calls' (25 ms beside 250 ms): on a linear axis its bar was a tenth of
    # theirs (in the demo, 100 ms beside 4,000 ms: a line along the axis).
    search, call = browser.execute_script(
        "const c = window.scoutDashboardCharts['chart-latency'];"
        "return [0, 1].map(i => c.getDatasetMeta(i).data[0].height);"
    )
    assert search >= call / 4, (search, call)
    screenshot(browser, "operator-dashboard")


def test_status_doughnuts_colour_and_name_each_status_as_its_badge(browser, live_server, django_user_model):
    """A failed sync was drawn blue and a success orange (the palette's order): each status now has its badge's
    colour and name, the same in both doughnuts."""
    from django.utils import timezone

    from catalog.choices import ServerStatus, SyncStatus
    from catalog.models import SyncRun
    from tests.governance.factories import ServerFactory

    django_user_model.objects.create_superuser(username="root", email=None, password="pw-root-123")
    down = ServerFactory(slug="down", status=ServerStatus.UNAVAILABLE)
    up = ServerFactory(slug="up")
    for server, status in ((down, SyncStatus.FAILED), (up, SyncStatus.SUCCESS), (up, SyncStatus.SUCCESS)):
        SyncRun.objects.create(server=server, status=status, started_at=timezone.now())
    admin_login(browser, live_server.url, "root", "pw-root-123", path="/admin/dashboard/")
    drawn = browser.execute_script(
        """const css = getComputedStyle(document.documentElement);
        const named = {ok: css.getPropertyValue('--scout-ok').trim(), bad: css.getPropertyValue('--scout-bad').trim()};
        const colour = (value) => Object.keys(named).find((name) => named[name] === value) || value;
        return Object.fromEntries(['chart-syncs', 'chart-servers'].map((id) => {
            const chart = window.scoutDashboardCharts[id];
            const dataset = chart.data.datasets[0];
            const slices = chart.data.labels.map(
                (label, i) => [label, [dataset.data[i], colour(dataset.backgroundColor[i])]]);
            return [id, Object.fromEntries(slices)];
        }));"""
    )
    assert drawn["chart-syncs"] == {"Failed": [1, "bad"], "Succeeded": [2, "ok"]}
    assert drawn["chart-servers"] == {"Unavailable": [1, "bad"], "Active": [1, "ok"]}
    screenshot(browser, "dashboard-status-doughnuts")


def test_an_empty_dashboard_says_what_would_fill_each_chart(browser, live_server, django_user_model):
    django_user_model.objects.create_superuser(username="root", email=None, password="pw-root-123")
    admin_login(browser, live_server.url, "root", "pw-root-123", path="/admin/dashboard/")
    assert (
        browser.execute_script("return window.scoutDashboardCharts && Object.keys(window.scoutDashboardCharts).length")
        == 0
    )
    assert browser.execute_script("return document.querySelectorAll('canvas').length") == 0
    sentences = [element.text for element in browser.find_elements("css selector", "p.dash-empty")]
    assert len(sentences) == 6 and all(sentence.startswith("No ") for sentence in sentences)
    assert "execute_tool" in sentences[0]  # what would fill it
    screenshot(browser, "operator-dashboard-empty")


def test_operator_opens_the_pending_approvals_count_and_reaches_the_server_to_grant(
    browser, live_server, django_user_model, superuser, member
):
    """The count was a number an operator could not open: it now lists what waits and who may decide it, and a
    request no one may decide leads to its server's page, where approve is granted. At 800 px each request is a card
    (as a table, "who may decide" was past the window's edge)."""
    from django.contrib.auth.models import Group
    from selenium.webdriver.common.by import By

    from governance.principals import principal_for_user
    from governance.roles import OPERATORS
    from governance.services.approvals import approval_request_create
    from governance.services.permissions import permission_grant
    from tests.governance.factories import ServerFactory, ToolFactory

    operator = django_user_model.objects.create_user(username="operator", password="pw-operator-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    tool = ToolFactory(server=ServerFactory(slug="billing"), name="refund_customer_payment", annotations=None)
    for action in ("discover", "execute"):  # one who may call it: a request of anyone else waits for no one
        permission_grant(actor=superuser, target=tool, action=action, holder=member)
    waiting = approval_request_create(principal=principal_for_user(member), tool=tool, arguments={"amount": 5})

    admin_login(browser, live_server.url, "operator", "pw-operator-123", path="/admin/dashboard/")
    count = browser.find_element(By.CSS_SELECTOR, "#tile-pending-approvals a")
    assert count.text == "1"
    click_through(browser, count)
    row = browser.find_element(By.CSS_SELECTOR, f'#waiting-approvals tr[data-approval-id="{waiting.approval_id}"]')
    assert "billing::refund_customer_payment" in row.text and "No one" in row.text
    screenshot(browser, "operator-approvals-waiting")
    browser.set_window_size(800, 900)
    deciders = row.find_element(By.CSS_SELECTOR, "td.deciders")
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'});", deciders)
    screenshot(browser, "operator-approvals-waiting-800")
    assert browser.execute_script(
        "return document.documentElement.scrollWidth <= document.documentElement.clientWidth;"
    ), "the waiting approvals scroll sideways at 800 px"
    assert deciders.rect["x"] >= 0 and deciders.rect["x"] + deciders.rect["width"] <= 800
    label = "return getComputedStyle(arguments[0], '::before').content;"
    assert browser.execute_script(label, deciders) == '"Who may decide: "'  # the card names each line
    browser.set_window_size(1280, 900)
    click_through(browser, row.find_element(By.PARTIAL_LINK_TEXT, "give approve on billing"))
    assert browser.find_element(By.CSS_SELECTOR, "#content h1, #content h2").text == "Server billing"


def test_a_bar_of_failed_calls_by_server_leads_to_those_calls(browser, live_server, django_user_model, member):
    """ "Failed calls by server" said a server's calls were failing and led nowhere: its bar and the link under the
    chart now open the audit trail at that server's failed calls of the window shown, each with its error."""
    from django.contrib.auth.models import Group
    from selenium.webdriver.common.by import By

    from governance.roles import OPERATORS

    operator = django_user_model.objects.create_user(username="operator", password="pw-operator-123", is_staff=True)
    operator.groups.add(Group.objects.get(name=OPERATORS))
    seed_traffic(member)  # one failed call, of faulty::crash, and three that succeeded
    admin_login(browser, live_server.url, "operator", "pw-operator-123")
    for width in (1280, 800):
        browser.set_window_size(width, 900)
        browser.get(f"{live_server.url}/admin/dashboard/?window=1h")
        link = browser.find_element(By.CSS_SELECTOR, "#chart-failures-links a")
        assert link.text == "faulty: 1"
        browser.execute_script("arguments[0].scrollIntoView({block: 'end'});", link)
        screenshot(browser, f"operator-dashboard-failures-{width}")
        # The bar itself: its centre, from Chart.js, as an offset from the canvas's centre.
        canvas = browser.find_element(By.ID, "chart-failures")
        x, y = browser.execute_script(
            "const bar = window.scoutDashboardCharts['chart-failures'].getDatasetMeta(0).data[0];"
            "const c = arguments[0]; return [bar.base + (bar.x - bar.base) / 2 - c.clientWidth / 2,"
            " bar.y - c.clientHeight / 2];",
            canvas,
        )
        click_through(browser, canvas, at=(int(x), int(y)))
        rows = browser.find_elements(By.CSS_SELECTOR, "#result_list tbody tr")
        assert [row.find_element(By.CSS_SELECTOR, ".field-tool_column").text for row in rows] == ["faulty::crash"]
        assert "Error" in rows[0].text
        screenshot(browser, f"operator-failed-calls-of-faulty-{width}")
