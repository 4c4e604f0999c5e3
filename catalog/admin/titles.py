"""Page titles for every admin page: what a list holds and which object a page is about, in the <title> and the
<h1> alike, instead of Django's "Select server to change" and "Change server" over the object's name."""

from typing import Any

from django.contrib.admin.utils import unquote
from django.http import HttpRequest
from django.utils.text import capfirst


class TitledAdminMixin:
    """Names a ModelAdmin's pages: ``list_title`` for its list (default: the plural name) and ``object_title`` for
    an object's page (default: the model's name and the object); a deletion page names the object it deletes."""

    list_title = ""

    def object_title(self, request: HttpRequest, obj: Any) -> str:
        return f"{capfirst(self.opts.verbose_name)} {obj}"  # type: ignore[attr-defined]

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> Any:
        title = self.list_title or capfirst(self.opts.verbose_name_plural)  # type: ignore[attr-defined]
        return super().changelist_view(request, {"title": title, **(extra_context or {})})  # type: ignore[misc]

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None) -> Any:
        obj = self.get_object(request, unquote(object_id))  # type: ignore[attr-defined]
        if obj is not None:
            extra_context = {"title": self.object_title(request, obj), "subtitle": None, **(extra_context or {})}
        return super().change_view(request, object_id, form_url, extra_context)  # type: ignore[misc]

    def history_view(self, request: HttpRequest, object_id: str, extra_context=None) -> Any:
        obj = self.get_object(request, unquote(object_id))  # type: ignore[attr-defined]
        if obj is not None:
            extra_context = {"title": f"History: {self.object_title(request, obj)}", **(extra_context or {})}
        return super().history_view(request, object_id, extra_context)  # type: ignore[misc]

    def delete_view(self, request: HttpRequest, object_id: str, extra_context=None) -> Any:
        # Django's "Delete" (or "Cannot delete …") stays the heading; the object it is about is named under it.
        obj = self.get_object(request, unquote(object_id))  # type: ignore[attr-defined]
        if obj is not None:
            extra_context = {"subtitle": self.object_title(request, obj), **(extra_context or {})}
        return super().delete_view(request, object_id, extra_context)  # type: ignore[misc]
