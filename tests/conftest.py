"""Shared fixtures. Personas (owner, approver, member, outsider, superuser) are added by governance."""

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

# Variables Celery reads from the environment ahead of its configuration (celery.app.utils.Settings): set in the
# shell that runs the suite, they override REDIS_URL in this process and in every gateway and worker a test starts,
# so a test's own redis-server is never the broker (tests/mcpgateway/test_broker_outage.py: the outage it makes
# went unseen, nothing was kept). The suite's broker is REDIS_URL's, or a test's own; these are dropped.
# (A production start refuses them unless they name REDIS_URL's Redis: scoutsite/checks.py.)
CELERY_ENV_OVERRIDES = (
    "CELERY_BROKER_URL",
    "CELERY_BROKER_READ_URL",
    "CELERY_BROKER_WRITE_URL",
    "CELERY_RESULT_BACKEND",
)
_dropped_celery_env = [name for name in CELERY_ENV_OVERRIDES if os.environ.pop(name, None) is not None]


def pytest_configure(config: pytest.Config) -> None:
    """Passwords hashed quickly (tests/hashers.py); the real hashers stay listed after it, so hashes made the
    production way (fixtures, a started process) are still checked."""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["tests.hashers.QuickPBKDF2PasswordHasher", *settings.PASSWORD_HASHERS]
    # Postgres: a commit returns without waiting for its WAL to reach the disk (synchronous_commit=off). Other sessions
    # see it just the same; only a crash of the server could lose the last commits, and no test database outlives
    # one. Transactional tests commit every write: 4 ms each on a loaded disk, 0.07 ms without the wait.
    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.postgresql":
        options = database.setdefault("OPTIONS", {})
        options["options"] = f"{options.get('options', '')} -c synchronous_commit=off".strip()
    # A document text is run through the model once a session, not again after each test's emptied database.
    from tests import vector_memo

    vector_memo.install()
    # pytest-django's live server keeps each request thread's database connection (tests/live_server.py).
    from django.test.testcases import LiveServerThread

    from tests.live_server import KeptConnectionsWSGIServer

    LiveServerThread.server_class = KeptConnectionsWSGIServer


def pytest_report_header(config: pytest.Config) -> str | None:
    if not _dropped_celery_env:
        return None
    return f"ignored {', '.join(_dropped_celery_env)} from the environment: the suite's broker is REDIS_URL's"


@pytest.fixture(autouse=True)
def celery_eager(request: pytest.FixtureRequest):
    """Run Celery tasks in-process for ordinary tests, even when REDIS_URL makes the app non-eager.

    Tests marked ``celery_worker`` start a real worker and keep the configured (non-eager) behaviour.
    """
    from celery._state import _set_task_join_will_block

    from scoutsite import celery_app

    if request.node.get_closest_marker("celery_worker"):
        yield
        return
    saved = celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates
    celery_app.conf.task_always_eager = True
    celery_app.conf.task_eager_propagates = True
    # Celery's "a task is running here: never wait for a result" flag is one per process, not per thread. An eager
    # task on a test gateway's thread overlapping one on the test's own thread can leave it set (each restores what
    # it saw on entry), and every later ``result.get()`` in the process then raises "Never call result.get() within
    # a task!". Each test starts with it cleared; tests wait with ``task_result`` (tests/celery_results.py).
    _set_task_join_will_block(False)
    yield
    celery_app.conf.task_always_eager, celery_app.conf.task_eager_propagates = saved


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup) -> Iterator[None]:
    """pytest-django's test database; between transactional tests (some 660) reset as Django's flush +
    post_migrate would leave it, for a fraction of its cost (tests/dbreset.py). Django's own flush ran 0.2 s a test
    on a quiet machine (2-3 s loaded); the reset deletes every row but the re-created ones in one transaction."""
    from django.core.management import call_command
    from django.test import TransactionTestCase

    from tests.dbreset import DatabaseReset

    flush = TransactionTestCase._fixture_teardown
    resets: dict[str, DatabaseReset] = {}

    def fixture_teardown(self) -> None:
        if self.available_apps is not None or self.serialized_rollback:
            flush(self)  # Django's own: a subset of tables, or no post_migrate
            return
        for alias in self._databases_names(include_mirrors=False):
            reset = resets.setdefault(alias, DatabaseReset(alias))
            if not reset.restore():
                call_command("flush", verbosity=0, interactive=False, database=alias, reset_sequences=False)
                reset.capture()

    TransactionTestCase._fixture_teardown = fixture_teardown
    yield
    TransactionTestCase._fixture_teardown = flush


@pytest.fixture(scope="session")
def live_server(django_db_setup, live_server):
    """pytest-django's, set up after the test database and so stopped before it is dropped: its request threads keep
    their connections until then (tests/live_server.py)."""
    return live_server


@pytest.fixture(autouse=True)
def fresh_search_generation():
    """The current index generation is kept per process for a moment; a test's flushed database must not be
    searched with the previous test's generation (its snapshot names tools that no longer exist)."""
    from search.selectors import generation_token_forget

    generation_token_forget()


@pytest.fixture(autouse=True)
def inline_discovery_writes(settings):
    """Discovery records are written behind the request in production (governance/writebehind.py); tests
    write them inline so a test reads what the request it made wrote. tests/governance/test_write_behind.py
    covers the queue itself."""
    settings.SCOUT_WRITE_BEHIND_SECONDS = 0


@pytest.fixture(autouse=True)
def unlimited_sign_ins(settings):
    """Tests sign in through the admin's form many times from one address, with a count in a cache that may outlive
    a test (Redis): no limit, but in tests/scoutsite/test_admin_login_rate.py, which sets its own."""
    settings.SCOUT_ADMIN_LOGIN_RATE = ""
    # Refused bearer tokens per address: many tests send some from 127.0.0.1 (the limit's own tests set one).
    settings.SCOUT_REFUSED_TOKEN_RATE = ""


# --- evaluation data -------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def eval_dir() -> Path:
    """``../shared/eval`` (or ``$SCOUT_EVAL_DIR``): skips with the reason when absent, but fails when
    ``SCOUT_REQUIRE_EVAL_DATA=1`` (CI), so missing data can never silently pass there."""
    from django.conf import settings

    path = Path(os.environ.get("SCOUT_EVAL_DIR") or Path(settings.BASE_DIR).parent / "shared" / "eval")
    if not path.is_dir():
        reason = f"evaluation data not found at {path} (set SCOUT_EVAL_DIR)"
        if os.environ.get("SCOUT_REQUIRE_EVAL_DATA") == "1":
            pytest.fail(f"{reason}; SCOUT_REQUIRE_EVAL_DATA=1 requires it")
        pytest.skip(reason)
    return path


# --- governance personas ---------------------------------------------------------------------------
# owner: staff who runs a server; approver: staff who decides approvals; member: an ordinary user of
# granted tools; outsider: an active user with no grants; superuser: a Django superuser. Grants are made
# per test (tests/governance/conftest.py has helpers): a persona alone sees nothing.


@pytest.fixture(autouse=True)
def fresh_visibility_cache():
    """A shared cache (Redis in CI) outlives each test's rolled-back database, and primary keys repeat;
    start every test on a new visibility-cache version so no set cached by an earlier test is read. And with
    the cache marked up: an earlier test that stopped Redis (test_redis_outage) can leave a late cache error
    from a background thread, which would have every cache call of the next tests skip the cache for
    SCOUT_CACHE_RETRY_SECONDS (seen: a batched learned reindex armed three times instead of once)."""
    from django.core.cache import cache

    from catalog.cachesafe import cache_reset
    from governance.cache import visibility_cache_reset
    from search.usage import RECOUNT_PENDING_KEY

    cache_reset()
    visibility_cache_reset()
    # An earlier test's database flush at teardown (people deleted, eager mode already restored) queues a learned
    # teachers' recount to the broker, whose marker would keep this test's recounts from being queued for minutes.
    cache.delete(RECOUNT_PENDING_KEY)


def _persona(django_user_model, username: str, **extra):
    # No password: tests log in with force_login, and skipping the slow password hash keeps them fast.
    return django_user_model.objects.create_user(username=username, **extra)


@pytest.fixture
def owner(django_user_model):
    return _persona(django_user_model, "owner", is_staff=True)


@pytest.fixture
def approver(django_user_model):
    return _persona(django_user_model, "approver", is_staff=True)


@pytest.fixture
def member(django_user_model):
    return _persona(django_user_model, "member")


@pytest.fixture
def outsider(django_user_model):
    return _persona(django_user_model, "outsider")


@pytest.fixture
def superuser(django_user_model):
    return django_user_model.objects.create_superuser(username="superuser", email=None, password=None)


@pytest.fixture
def loopback_upstreams(settings):
    """Let HTTP upstreams on this machine be reached (SCOUT_UPSTREAM_ALLOWED_HOSTS is empty by default: none is), as
    a deployment serving a local MCP server or OpenAPI service lists 127.0.0.1/32. Used by the fixtures that start
    local HTTP servers."""
    settings.SCOUT_UPSTREAM_ALLOWED_HOSTS = [*settings.SCOUT_UPSTREAM_ALLOWED_HOSTS, "127.0.0.1/32"]


@pytest.fixture
def redis_connect_log(monkeypatch) -> list[int]:
    """One entry for each TCP connection redis-py opens in this process from now on."""
    import redis.connection

    connects: list[int] = []
    connect = redis.connection.Connection._connect

    def counted(self):
        connects.append(1)
        return connect(self)

    monkeypatch.setattr(redis.connection.Connection, "_connect", counted)
    return connects


@pytest.fixture
def redis_connects(redis_connect_log) -> Iterator[list[int]]:
    """A throwaway redis-server of this test's own as the default cache (and REDIS_URL), and the connections opened
    to it, one entry each: a process keeps one pool (catalog.cachesafe.shared_cache), not one per request context."""
    from django.test import override_settings

    from catalog.cachesafe import cache_reset
    from tests.mcpgateway.conftest import REDIS_SERVER, ThrowawayRedis

    if REDIS_SERVER is None:
        pytest.skip("needs a redis-server binary")
    server = ThrowawayRedis()
    server.start()
    redis_connect_log.clear()  # the server's own start-up check is not the code's
    url = f"redis://127.0.0.1:{server.port}/0"
    caches = {"default": {"BACKEND": "catalog.rediscache.ScoutRedisCache", "LOCATION": url}}
    try:
        with override_settings(REDIS_URL=url, CACHES=caches):  # put back before the server stops
            cache_reset()
            yield redis_connect_log
    finally:
        server.stop()
        cache_reset()
