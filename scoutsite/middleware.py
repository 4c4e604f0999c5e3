"""Request checks every Django view needs before it reads its input (the admin, the REST API, the health views)."""

import threading
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseBadRequest, JsonResponse

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

    def middleware(request: HttpRequest) -> HttpResponse:
        if not nul_character_in(request):
            return get_response(request)
        if request.path_info.startswith("/api/"):
            body = {"error": {"code": "parse_error", "message": NUL_MESSAGE, "fields": {}}}
            return JsonResponse(body, status=400)
        return HttpResponseBadRequest(NUL_MESSAGE, content_type="text/plain; charset=utf-8")

    return middleware


API_FULL_MESSAGE = "Scout is answering as many API requests as it can right now. Try again in a few seconds."


def limit_api_requests(get_response: Callable[[HttpRequest], HttpResponse]) -> Callable[[HttpRequest], HttpResponse]:
    """At most ``SCOUT_API_MAX_CONCURRENT`` REST API requests (/api/) at once in this process (F7); one past it is a
    503 ``service_busy`` with Retry-After at once, before it opens a database connection.

    Django runs each request on a thread of its own, with a database connection of its own: with the database locked
    every request waits there up to SCOUT_DB_LOCK_TIMEOUT, so without a bound enough of them reach Postgres'
    max_connections and every other connection is refused (the gateway's ORM threads, the workers)."""
    from scoutsite.api.errors import BUSY_RETRY_AFTER_SECONDS

    limit = settings.SCOUT_API_MAX_CONCURRENT
    slots = threading.BoundedSemaphore(limit) if limit > 0 else None

    def middleware(request: HttpRequest) -> HttpResponse:
        if slots is None or not request.path_info.startswith("/api/"):
            return get_response(request)
        if not slots.acquire(blocking=False):
            body = {"error": {"code": "service_busy", "message": API_FULL_MESSAGE, "fields": {}}}
            return JsonResponse(body, status=503, headers={"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)})
        try:
            return get_response(request)
        finally:
            slots.release()

    return middleware
