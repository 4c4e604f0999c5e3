"""One JSON error shape for the whole API: ``{"error": {"code", "message", "fields"}}``, never a traceback."""

import logging
from typing import Any

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.core.exceptions import ValidationError as DjangoValidationError
from django.db import DatabaseError
from django.http import JsonResponse
from rest_framework import exceptions, status
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler
from rest_framework.views import set_rollback

from catalog.dbbusy import database_busy

logger = logging.getLogger("scout.api")

BUSY_MESSAGE = "Scout's database is busy right now, so this request was not carried out. Try again in a few seconds."
BUSY_RETRY_AFTER_SECONDS = 2

# Every 404 carries these exact bytes, so an unknown object and one the caller may not see look the same.
NOT_FOUND_MESSAGE = "Not found."


def _first_message(detail: Any) -> str:
    if isinstance(detail, list) and detail:
        return _first_message(detail[0])
    if isinstance(detail, dict) and detail:
        return _first_message(next(iter(detail.values())))
    return str(detail)


def error_body(code: str, message: str, fields: dict[str, Any] | None = None) -> dict[str, Any]:
    """The API's one error shape."""
    return {"error": {"code": code, "message": message, "fields": fields or {}}}


def busy_headers() -> dict[str, str]:
    """What every busy answer (503 ``service_busy``) carries: when to try again."""
    return {"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)}


def error_response(code: str, message: str, *, status: int, headers: dict[str, str] | None = None) -> JsonResponse:
    """The same error as a plain Django response, for what answers an /api/ request before DRF runs (the
    middleware's NUL check and concurrency bound): one shape, made here."""
    return JsonResponse(error_body(code, message), status=status, headers=headers)


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response:
    """DRF's handler (status codes, WWW-Authenticate, Retry-After) with Scout's body; anything unexpected is
    logged and answered with a bare 500."""
    if isinstance(exc, DjangoValidationError):
        # Services validate with full_clean(); their errors are the caller's input errors.
        exc = exceptions.ValidationError(exc.message_dict if hasattr(exc, "error_dict") else exc.messages)
    if isinstance(exc, DatabaseError) and database_busy(exc):
        # A locked database (F7): 503, the same for every view; the request's transaction is rolled back.
        set_rollback()
        return Response(
            error_body("service_busy", BUSY_MESSAGE),
            status=status.HTTP_503_SERVICE_UNAVAILABLE,
            headers={"Retry-After": str(BUSY_RETRY_AFTER_SECONDS)},
        )
    if isinstance(exc, RequestDataTooBig):
        # A body past DATA_UPLOAD_MAX_MEMORY_SIZE (Django refuses to read it): the caller's input, not Scout's fault;
        # it was a 500 and a traceback logged per request, at the caller's rate (T13, C1-7).
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        return Response(
            error_body("request_too_large", f"The request body is larger than {limit} bytes."),
            status=status.HTTP_413_REQUEST_ENTITY_TOO_LARGE,
        )
    response = drf_exception_handler(exc, context)
    if response is None:
        logger.error("unhandled API error in %s", context.get("view").__class__.__name__, exc_info=exc)
        set_rollback()
        return Response(error_body("server_error", "Internal error."), status=status.HTTP_500_INTERNAL_SERVER_ERROR)
    if isinstance(exc, exceptions.NotFound) or response.status_code == status.HTTP_404_NOT_FOUND:
        response.data = error_body("not_found", NOT_FOUND_MESSAGE)
        return response
    if isinstance(exc, exceptions.ValidationError):
        detail = exc.detail
        fields = detail if isinstance(detail, dict) else {}
        if isinstance(fields, dict) and "non_field_errors" in fields:
            message = _first_message(fields["non_field_errors"])
        elif isinstance(detail, dict):
            message = "Invalid input."
        else:
            message = _first_message(detail)
        response.data = error_body("invalid", message, fields)
        return response
    if isinstance(exc, exceptions.APIException):
        codes = exc.get_codes()
        code = codes if isinstance(codes, str) else exc.default_code
        response.data = error_body(code, _first_message(exc.detail))
    return response
