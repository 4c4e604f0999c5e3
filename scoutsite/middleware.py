"""Request checks every Django view needs before it reads its input (the admin, the REST API, the health views)."""

from collections.abc import Callable

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
