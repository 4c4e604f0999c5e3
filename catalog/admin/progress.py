"""A running job's progress on its change page: a panel refreshed by polling a JSON endpoint.

The endpoint sits behind the admin login (``admin_view``) and the model's view permission, and returns
``progress_snapshot`` only: counts, times, stage and the run's error, nothing of the objects it touches.
"""

import json
from typing import Any

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, JsonResponse
from django.template.loader import render_to_string
from django.urls import path, reverse
from django.utils.safestring import mark_safe

POLL_MILLISECONDS = 1000


class ProgressAdminMixin:
    """Adds ``<id>/progress.json`` and a ``progress_panel`` read-only field; subclasses say what a run's
    progress is in ``progress_snapshot_for``."""

    def progress_snapshot_for(self, obj: Any) -> dict[str, Any]:
        raise NotImplementedError

    def _progress_url_name(self) -> str:
        return f"{self.opts.app_label}_{self.opts.model_name}_progress"  # type: ignore[attr-defined]

    def get_urls(self) -> list:
        view = self.admin_site.admin_view(self.progress_view)  # type: ignore[attr-defined]
        own = [path("<int:object_id>/progress.json", view, name=self._progress_url_name())]
        return [*own, *super().get_urls()]  # type: ignore[misc]

    def progress_view(self, request: HttpRequest, object_id: int) -> JsonResponse:
        if not self.has_view_permission(request):  # type: ignore[attr-defined]
            raise PermissionDenied
        # The admin's own rows only (governance narrows sync runs to the admin's tenants, Z12), as its page shows
        # them (``get_object``: a run's error with its URLs cut for who may not read the server's connection).
        obj = self.get_object(request, str(object_id))  # type: ignore[attr-defined]
        if obj is None:
            raise Http404
        return JsonResponse(self.progress_snapshot_for(obj))

    @admin.display(description="progress")
    def progress_panel(self, obj: Any) -> str:
        if obj is None or obj.pk is None:
            return "—"
        snapshot = self.progress_snapshot_for(obj)
        url = reverse(f"admin:{self._progress_url_name()}", args=[obj.pk])
        html = render_to_string(
            "admin/progress/panel.html",
            {"url": url, "snapshot": snapshot, "snapshot_json": json.dumps(snapshot), "poll_ms": POLL_MILLISECONDS},
        )
        # The admin turns newlines of a read-only field into <br>; the template is autoescaped, so safe.
        return mark_safe(html.replace("\n", " "))  # noqa: S308
