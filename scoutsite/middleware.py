"""Request checks every Django view needs before it reads its input (the admin, the REST API, the health views)."""

import logging
import threading
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest
from django.utils.cache import add_never_cache_headers

logger = logging.getLogger("scout.serving")


def api_answers_never_cached(
    get_response: Callable[[HttpRequest], HttpResponse],
) -> Callable[[HttpRequest], HttpResponse]:
    """Every answer under /api/ is marked never to be kept (``Cache-Control: no-store, private``, as ``admin_view``
    marks every admin page): they are a person's data (an approval's exact arguments, the audit trail, their tokens),
    which a browser's disk cache kept for the next user of the computer, and a proxy told to cache could serve on."""

    def middleware(request: HttpRequest) -> HttpResponse:
        response = get_response(request)
        if request.path_info.startswith("/api/"):
            add_never_cache_headers(response)
        return response

    return middleware


NUL_MESSAGE = "A request's address and form fields may not hold a NUL character."
FORM_CONTENT_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def nul_character_in(request: HttpRequest) -> bool:
    """Whether the path, a query parameter or a form field of ``request`` holds a NUL character (``%00``).

    Views hand these to the database as they come (a filter, a slug, a lookup), and Postgres refuses a NUL in text:
    a 500 with a traceback logged per request, where SQLite only matched nothing. A JSON body is the API parser's
    (it is read there, never here); a form is read only when sent as one, as the CSRF check reads it anyway."""
    if "\x00" in request.path_info:
        return True
    fields = [request.GET]
    if request.method == "POST" and request.content_type in FORM_CONTENT_TYPES:
        fields.append(request.POST)
    return any("\x00" in key or any("\x00" in value for value in values) for q in fields for key, values in q.lists())


def refuse_nul_characters(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """A request holding a NUL character (``nul_character_in``) is a 400 before any view runs: the API's JSON error
    under /api/, a plain one elsewhere."""
    from scoutsite.api.errors import error_response

    def middleware(request: HttpRequest) -> HttpResponse:
        if not nul_character_in(request):
            return get_response(request)
        if request.path_info.startswith("/api/"):
            return error_response("parse_error", NUL_MESSAGE, status=400)
        return HttpResponseBadRequest(NUL_MESSAGE, content_type="text/plain; charset=utf-8")

    return middleware


API_FULL_MESSAGE = "Scout is answering as many API requests as it can right now. Try again in a few seconds."


def limit_api_requests(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """At most ``SCOUT_API_MAX_CONCURRENT`` REST API requests (/api/) at once in this process (F7); one past it is a
    503 ``service_busy`` with Retry-After at once, before it opens a database connection.

    Django runs each request on a thread of its own, with a database connection of its own: with the database locked
    every request waits there up to SCOUT_DB_LOCK_TIMEOUT, so without a bound enough of them reach Postgres'
    max_connections and every other connection is refused (the gateway's ORM threads, the workers).

    The bound is this process's: each uvicorn worker and replica has its own (``serving_connections_text`` says so
    at start, on Postgres)."""
    from scoutsite.api.errors import busy_headers, error_response

    limit = settings.SCOUT_API_MAX_CONCURRENT
    slots = threading.BoundedSemaphore(limit) if limit > 0 else None

    def middleware(request: HttpRequest) -> HttpResponse:
        if slots is None or not request.path_info.startswith("/api/"):
            return get_response(request)
        if not slots.acquire(blocking=False):
            return error_response("service_busy", API_FULL_MESSAGE, status=503, headers=busy_headers())
        try:
            return get_response(request)
        finally:
            slots.release()

    return middleware


def serving_connections_text(max_connections: int, api_limit: int, orm_threads: int) -> tuple[int, str]:
    """The log level and line that tell an operator how many connections one serving process may hold on Postgres
    against the server's ``max_connections``: the bound above is per process, so N uvicorn workers and replicas hold
    up to N times it. WARNING when fewer than two such processes fit (the gateway's with a Celery worker beside it,
    or two workers), or when REST requests are not bounded at all."""
    if api_limit <= 0:
        return logging.WARNING, (
            f"database: REST API requests are not bounded (SCOUT_API_MAX_CONCURRENT=0): with the database locked each "
            f"waits on a Postgres connection of its own, until the server's max_connections ({max_connections}) "
            "refuses every other one. Set SCOUT_API_MAX_CONCURRENT (default 32)."
        )
    per_process = api_limit + orm_threads
    fit = max_connections // per_process
    text = (
        f"database: this process may hold up to {per_process} Postgres connections (SCOUT_API_MAX_CONCURRENT="
        f"{api_limit} REST requests + {orm_threads} MCP gateway threads, and one per admin page being served); the "
        f"server allows {max_connections} (max_connections), so {fit} such process(es) fit, every uvicorn worker and "
        "replica counting, beside the Celery workers and commands. For more processes lower SCOUT_API_MAX_CONCURRENT "
        "or raise max_connections."
    )
    return (logging.WARNING if fit < 2 else logging.INFO), text


def serving_connections_log() -> None:
    """On Postgres, log ``serving_connections_text`` once as a serving process starts (its lifespan, in a thread:
    one query). Nothing on SQLite, and nothing when the database cannot be asked (the health checks say that)."""
    from django.db import connection

    from mcpgateway.db import THREADS

    if connection.vendor != "postgresql":
        return
    try:
        with connection.cursor() as cursor:
            cursor.execute("SHOW max_connections")
            max_connections = int(cursor.fetchone()[0])
    except Exception:  # noqa: BLE001 - a line of advice never stops a process from serving (nor a test's blocker)
        return
    finally:
        connection.close()
    level, text = serving_connections_text(max_connections, settings.SCOUT_API_MAX_CONCURRENT, THREADS)
    logger.log(level, text)


def memo_per_request(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """One ``request_memo`` per request, its rendering included (an admin page's header counts too): what the
    selectors of one page read again and again (the viewer's tenants) is read once; a write that changes who sees
    what empties it (``visibility_invalidate``)."""
    from governance.cache import request_memo_block

    def middleware(request: HttpRequest) -> HttpResponse:
        with request_memo_block():
            return get_response(request)

    return middleware
