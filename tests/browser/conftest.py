"""A real browser for admin journeys: headless Chromium from Debian's ``chromium`` and ``chromium-driver``
packages, driven by selenium. Skipped with the reason when they are absent, except where
SCOUT_REQUIRE_BROWSER=1 (CI installs them), where their absence fails. Screenshots go to var/screenshots/."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.search.conftest import clean_search_state, encoder, small_catalog  # noqa: F401 - shared fixtures

SCREENSHOTS = Path(__file__).resolve().parents[2] / "var" / "screenshots"
# Tenant A's operator in the shared-server tenant tests (``shared_server_tenants``): admin_login(..., *OPERATOR_A).
OPERATOR_A = ("op-alpha", "pw-op-alpha-123")
CHROMIUM = ("chromium", "chromium-browser")
DRIVER = "chromedriver"


def _find(names: tuple[str, ...]) -> str | None:
    return next((path for path in map(shutil.which, names) if path), None)


@pytest.fixture(scope="session")
def browser_binaries() -> tuple[str, str]:
    chromium, driver = _find(CHROMIUM), _find((DRIVER,))
    if not (chromium and driver):
        reason = "headless Chromium not found: apt-get install -y chromium chromium-driver"
        if os.environ.get("SCOUT_REQUIRE_BROWSER") == "1":
            pytest.fail(f"{reason} (SCOUT_REQUIRE_BROWSER=1 requires it)")
        pytest.skip(reason)
    return chromium, driver


WINDOW = (1280, 900)
# Seconds a lookup waits for its element to appear (selenium's implicit wait). An empty answer waits all of it: a
# check that something is absent asks ``find_now`` instead.
IMPLICIT_WAIT = 5
# Seconds between the checks of a wait (selenium's default, 0.5, left each page change up to half a second idle).
POLL = 0.05


def _start_chromium(chromium: str, driver: str) -> Any:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        f"--window-size={WINDOW[0]},{WINDOW[1]}",
    ):
        options.add_argument(argument)
    # An explicit driver path: selenium never tries to download one (no network here).
    return webdriver.Chrome(service=Service(executable_path=driver), options=options)


def _as_new(session: Any) -> None:
    """``session`` as a new browser leaves it for a test: one blank tab, no alert, no cookies of any site, the
    default window size and wait. Raises WebDriverException when the browser is gone."""
    from selenium.common.exceptions import NoAlertPresentException

    handles = session.window_handles
    for handle in handles[1:]:
        session.switch_to.window(handle)
        session.close()
    session.switch_to.window(handles[0])
    try:
        session.switch_to.alert.dismiss()
    except NoAlertPresentException:
        pass
    session.get("about:blank")
    session.execute_cdp_cmd("Network.clearBrowserCookies", {})
    session.set_window_size(*WINDOW)
    session.implicitly_wait(IMPLICIT_WAIT)


_CHROMIUM: dict[str, Any] = {}


@pytest.fixture(scope="session")
def _chromium(browser_binaries) -> Iterator[dict[str, Any]]:
    """One Chromium for the session (68 tests each started and quit their own: about 1 s of CPU and 5 s on a loaded
    machine apiece), replaced when a test left it unusable."""
    yield _CHROMIUM
    if "session" in _CHROMIUM:
        _CHROMIUM.pop("session").quit()


@pytest.fixture
def browser(browser_binaries, _chromium) -> Iterator[object]:
    """A browser as new: the session's Chromium with one blank tab, no cookies and the default window size (each
    test leaves it so; one it left unusable is quit and the next test starts another)."""
    from selenium.common.exceptions import WebDriverException

    if "session" not in _chromium:
        _chromium["session"] = _start_chromium(*browser_binaries)
        _chromium["session"].implicitly_wait(IMPLICIT_WAIT)
    session = _chromium["session"]
    yield session
    try:
        _as_new(session)  # what this test opened ends with it (a page polling the live server, say)
    except WebDriverException:
        with suppress(WebDriverException):
            _chromium.pop("session").quit()


def screenshot(browser, name: str) -> Path:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    path = SCREENSHOTS / f"{name}.png"
    browser.save_screenshot(str(path))
    return path


def admin_login(
    browser, base_url: str, username: str, password: str, *, path: str = "/admin/", form: bool = False
) -> None:
    """Signed in as ``username``, on ``path`` (the admin's home, where the sign-in page leads). ``form``: through the
    sign-in page, as a person does (the operator's, approver's and curator's journeys). Otherwise the browser is
    given the session cookie a sign-in with these credentials makes (Django's test client: the same password check,
    ``user_logged_in`` and session row) and opens ``path``: two page loads and a POST fewer for each other test."""
    from selenium.common.exceptions import TimeoutException
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    if not form:
        from django.conf import settings
        from django.test import Client

        client = Client()
        assert client.login(username=username, password=password), "login failed"
        cookie = {"name": settings.SESSION_COOKIE_NAME, "value": client.cookies[settings.SESSION_COOKIE_NAME].value}
        browser.execute_cdp_cmd("Network.setCookie", {**cookie, "url": base_url, "path": "/", "httpOnly": True})
        browser.get(f"{base_url}{path}")
        assert "/admin/login/" not in browser.current_url, "login failed: the session cookie was not accepted"
        return
    browser.get(f"{base_url}/admin/login/")
    browser.find_element(By.NAME, "username").send_keys(username)
    browser.find_element(By.NAME, "password").send_keys(password)
    browser.find_element(By.CSS_SELECTOR, "input[type=submit], button[type=submit]").click()
    try:  # the click only starts the POST: wait for the navigation (a loaded machine takes a while)
        WebDriverWait(browser, 30, POLL).until(lambda driver: "/admin/login/" not in driver.current_url)
    except TimeoutException:
        raise AssertionError("login failed") from None
    if path != "/admin/":
        browser.get(f"{base_url}{path}")


def click_through(browser, element, timeout: float = 30, *, at: tuple[int, int] | None = None) -> None:
    """Click what submits a form or follows a link, and wait for the page it leads to: read at once, the old
    page's elements are still there and go stale a moment later (a loaded machine answers slowly). ``at``: click
    that far (x, y px) from the element's centre instead, e.g. a bar drawn on a canvas."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page = browser.find_element(By.TAG_NAME, "html")
    if at is None:
        element.click()
    else:
        ActionChains(browser).move_to_element_with_offset(element, *at).click().perform()

    def replaced(driver) -> bool:
        try:
            page.is_enabled()
        except WebDriverException:  # stale, or Chromium's "Node … does not belong to the document" mid-navigation
            return True
        return False

    WebDriverWait(browser, timeout, POLL).until(replaced)


def approver_and_tool(django_user_model, member, *, server: str, tool: str):
    """An approver ("appr", password "pw-appr-123") who may approve calls of ``server``'s ``tool`` (no
    annotations: every call needs approval), which ``member`` may discover and execute. Returns the tool."""
    from django.contrib.auth.models import Group

    from governance.roles import APPROVERS
    from governance.services.permissions import permission_grant
    from tests.governance.factories import ServerFactory, ToolFactory

    superuser = django_user_model.objects.create_superuser(username="root", email=None, password="pw-root-123")
    approver = django_user_model.objects.create_user(username="appr", password="pw-appr-123", is_staff=True)
    approver.groups.add(Group.objects.get(name=APPROVERS))
    created = ToolFactory(server=ServerFactory(slug=server), name=tool, annotations=None)
    for holder, action in ((member, "discover"), (member, "execute"), (approver, "approve")):
        permission_grant(actor=superuser, target=created.server, action=action, holder=holder)
    return created


def learned_by_teachers(tool, text: str, teachers: int, *, key: str):
    """A learned request of ``tool`` as the gateway learns one: ``teachers`` people who may execute the tool each
    searched ``text`` and then called it successfully. (Rows written straight, without confirmations, lose their
    counts to the teachers' recount that any visibility change queues, a login included.)"""
    from django.contrib.auth import get_user_model

    from governance.services.permissions import permission_grant
    from search.models import LearnedRequest
    from tests.search.factories import teach

    people = get_user_model().objects
    granter = people.filter(is_superuser=True).first() or people.create_superuser(username="granter", email=None)
    for n in range(teachers):
        person = people.create_user(username=f"teacher-{key}-{n}")
        for action in ("discover", "execute"):
            permission_grant(actor=granter, target=tool.server, action=action, holder=person)
        teach(person, tool, text)
    return LearnedRequest.objects.get(tool=tool, text=text)


def wait_for(browser, css: str, timeout: float = 30):
    """The element matching ``css``, waiting longer than the implicit wait (a page whose request syncs)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as EC
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, timeout, POLL).until(EC.presence_of_element_located((By.CSS_SELECTOR, css)))


def find_now(browser, by: str, value: str, *, within=None) -> list:
    """The elements matching (``within`` an element, or the page) once the page has loaded, without the implicit
    wait: an empty answer, what a check that something is absent expects, waited all of it (5 s each)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 30, POLL).until(
        lambda driver: driver.execute_script("return document.readyState") == "complete"
    )
    browser.implicitly_wait(0)
    try:
        return (within or browser).find_elements(by, value)
    finally:
        browser.implicitly_wait(IMPLICIT_WAIT)


@dataclass
class SharedServerTenants:
    """Tenant A's operator, the people made by username, and the server both tenants share."""

    operator: object
    people: dict[str, object]
    server: object


@pytest.fixture
def shared_server_tenants(django_user_model) -> Callable[..., SharedServerTenants]:
    """make(tenant_a=(...), tenant_b=(...), shared=(...)): tenant A's operator (``OPERATOR_A``, in Operators), the
    people named for tenant "tenant-a", tenant "tenant-b" and no tenant (an ``op-`` name is staff), and a server
    of no tenant, "shared-srv": the shape of the tests where an operator of tenant A reads shared pages."""

    def make(*, tenant_a=(), tenant_b=(), shared=()) -> SharedServerTenants:
        from django.contrib.auth.models import Group

        from governance.roles import OPERATORS
        from tests.governance.factories import ServerFactory, tenant_with

        create = django_user_model.objects.create_user
        username, password = OPERATOR_A
        operator = create(username=username, password=password, is_staff=True)
        operator.groups.add(Group.objects.get(name=OPERATORS))
        names = (*tenant_a, *tenant_b, *shared)
        people = {name: create(username=name, is_staff=name.startswith("op-")) for name in names}
        tenant_with("tenant-a", operator, *(people[name] for name in tenant_a))
        tenant_with("tenant-b", *(people[name] for name in tenant_b))
        return SharedServerTenants(operator=operator, people=people, server=ServerFactory(slug="shared-srv"))

    return make
