"""Page titles for every admin page: what a list holds and which object a page is about, in the <title> and the
<h1> alike, instead of Django's "Select server to change" and "Change server" over the object's name."""

from typing import Any

from django.http import HttpRequest
from django.utils.text import capfirst


class TitledAdminMixin:
    """Names a ModelAdmin's pages: ``list_title`` for its list (default: the plural name) and ``object_title`` for
    an object's page (default: the model's name and the object); a deletion page names the object it deletes. The
    object's title is its last breadcrumb too (``breadcrumb`` in the context: templates/admin/change_form.html),
    not its raw ``str()`` ("2026-12-03 08:37:25 high: what's in my…").

    An object's page is titled from the object its view loaded (in the response's context, before it renders), so
    the title costs no second load; a title given in ``extra_context`` stands."""

    list_title = ""

    def object_title(self, request: HttpRequest, obj: Any) -> str:
        return f"{capfirst(self.opts.verbose_name)} {obj}"  # type: ignore[attr-defined]

    def changelist_view(self, request: HttpRequest, extra_context: dict | None = None) -> Any:
        title = self.list_title or capfirst(self.opts.verbose_name_plural)  # type: ignore[attr-defined]
        return super().changelist_view(request, {"title": title, **(extra_context or {})})  # type: ignore[misc]

    def change_view(self, request: HttpRequest, object_id: str, form_url: str = "", extra_context=None) -> Any:
        response = super().change_view(request, object_id, form_url, extra_context)  # type: ignore[misc]
        return self._titled(
            request, response, "original", extra_context, lambda title: {"title": title, "subtitle": None}
        )

    def history_view(self, request: HttpRequest, object_id: str, extra_context=None) -> Any:
        response = super().history_view(request, object_id, extra_context)  # type: ignore[misc]
        return self._titled(request, response, "object", extra_context, lambda title: {"title": f"History: {title}"})

    def delete_view(self, request: HttpRequest, object_id: str, extra_context=None) -> Any:
        # Django's "Delete" (or "Cannot delete …") stays the heading; the object it is about is named under it.
        response = super().delete_view(request, object_id, extra_context)  # type: ignore[misc]
        return self._titled(request, response, "object", extra_context, lambda title: {"subtitle": title})

    def _titled(self, request: HttpRequest, response: Any, key: str, extra_context: dict | None, names) -> Any:
        """``response`` with the titles ``names`` gives for the object under ``key`` in its context, where it is a
        page still to render about an object (not a redirect) and ``extra_context`` named none of them."""
        context = getattr(response, "context_data", None)
        obj = context.get(key) if context else None
        if obj is not None:
            title = self.object_title(request, obj)
            titles = {"breadcrumb": title, **names(title)}
            context.update({name: value for name, value in titles.items() if name not in (extra_context or {})})
        return response
