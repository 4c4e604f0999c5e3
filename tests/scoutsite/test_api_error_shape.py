"""The REST API's errors have one shape, made in one place (``scoutsite.api.errors``): what answers an /api/ request
before DRF runs (the middleware's NUL check and concurrency bound) answers in it too, with the same headers as DRF's
answer for the same kind of error. The bound's 503 was built by hand beside the handler's (opsux5)."""

import json
import threading

import pytest
from django.db import OperationalError
from django.http import HttpResponse
from django.test import RequestFactory, override_settings

from scoutsite.api.errors import BUSY_MESSAGE, exception_handler
from scoutsite.middleware import API_FULL_MESSAGE, NUL_MESSAGE, limit_api_requests

pytestmark = pytest.mark.django_db


def _handler_busy_answer():
    """What DRF's handler answers for a locked database: the busy answer every REST view gives."""
    response = exception_handler(OperationalError("database is locked"), {"view": None})
    return response.data, dict(response.items())


@override_settings(SCOUT_API_MAX_CONCURRENT=1)
def test_the_concurrency_bound_answers_as_the_handler_answers_a_busy_database():
    entered, release = threading.Event(), threading.Event()

    def slow_view(request):
        entered.set()
        release.wait(30)
        return HttpResponse("served")

    middleware = limit_api_requests(slow_view)
    request = RequestFactory().post("/api/v1/search/")
    first = threading.Thread(target=middleware, args=(request,))
    first.start()
    try:
        assert entered.wait(30)
        refused = middleware(RequestFactory().post("/api/v1/search/"))
    finally:
        release.set()
        first.join(30)
    body, headers = _handler_busy_answer()
    assert refused.status_code == 503 and refused["Content-Type"] == "application/json"
    assert json.loads(refused.content) == {**body, "error": {**body["error"], "message": API_FULL_MESSAGE}}
    assert body["error"]["message"] == BUSY_MESSAGE
    assert refused["Retry-After"] == headers["Retry-After"]
    assert middleware(RequestFactory().post("/api/v1/search/")).content == b"served"  # the slot came back


def test_a_nul_under_the_api_is_answered_in_the_api_error_shape(client):
    response = client.get("/api/v1/tools/", {"q": "git\x00hub"})
    assert response.status_code == 400
    assert response.json() == {"error": {"code": "parse_error", "message": NUL_MESSAGE, "fields": {}}}
