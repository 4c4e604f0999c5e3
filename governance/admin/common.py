"""Shared admin helpers."""

from collections import defaultdict
from collections.abc import Iterable
from datetime import timedelta

from django.contrib import admin
from django.contrib.admin.views.main import PAGE_VAR, SEARCH_VAR
from django.core.paginator import Paginator
from django.urls import reverse
from django.utils.functional import cached_property
from django.utils.html import format_html

from catalog.admin.display import breakable_id  # noqa: F401 - moved there (catalog lists use it); imported from here

from ..selectors import tool_shaped_by

DEFAULT_TOKEN_LIFETIME = timedelta(days=90)
MAX_COUNTED_ROWS = 10_000


class BoundedCountPaginator(Paginator):
    """Counts at most MAX_COUNTED_ROWS rows, so an append-only table never costs a full COUNT(*)."""

    @cached_property
    def count(self) -> int:
        return self.object_list.order_by()[: MAX_COUNTED_ROWS + 1].count()


class PageBoundPaginator(Paginator):
    """Counts no further than page ``number`` (and one row past it, to know whether another page follows): a
    search matching nothing reads the table once, for the page, not a second time to count it (0.65 s at 300k
    audit events). ``more``: rows follow this page, how many is not known."""

    def __init__(self, object_list, per_page, *, number: int = 1, **kwargs) -> None:
        super().__init__(object_list, per_page, **kwargs)
        self.number = max(number, 1)

    @cached_property
    def _rows(self) -> list:
        bottom = (self.number - 1) * self.per_page
        return list(self.object_list[bottom : bottom + self.per_page + 1])

    @cached_property
    def count(self) -> int:
        return (self.number - 1) * self.per_page + len(self._rows)

    @property
    def more(self) -> bool:
        return len(self._rows) > self.per_page

    def page(self, number):
        number = self.validate_number(number)
        if number != self.number:
            return super().page(number)
        return self._get_page(self._rows[: self.per_page], number, self)  # the rows already read for the count


class PageBoundSearchMixin:
    """For a ModelAdmin of an append-only table: a searched list is counted only up to the page shown
    (``PageBoundPaginator``), so a search matching nothing reads the table once, for the page, and one matching every
    row reads a page of it, never all of it to count. Its pagination and search templates say "more than" when more
    rows follow (admin/page_bound_search_form.html)."""

    def get_paginator(self, request, queryset, per_page, orphans=0, allow_empty_first_page=True):
        if not request.GET.get(SEARCH_VAR):
            return super().get_paginator(request, queryset, per_page, orphans, allow_empty_first_page)
        try:
            number = int(request.GET.get(PAGE_VAR, 1))
        except ValueError:
            number = 1
        return PageBoundPaginator(queryset, per_page, number=number, allow_empty_first_page=allow_empty_first_page)

    def get_changelist_instance(self, request):
        changelist = super().get_changelist_instance(request)
        if isinstance(changelist.paginator, PageBoundPaginator) and not changelist.multi_page:
            # Django reads a one-page list again, whole: these are its rows, read already by the paginator.
            changelist.result_list = changelist.paginator.page(changelist.page_num).object_list
        return changelist


def admin_url_for(request, obj) -> str | None:
    """The admin page of ``obj`` when ``request``'s user may open it (its admin lists it for them and lets them
    view it), else None: a link shown only where it leads somewhere, never to a 403 or a 404."""
    return admin_urls_for(request, [obj]).get(obj)


def admin_urls_for(request, objs: Iterable) -> dict:
    """``admin_url_for`` of many objects at one query per model, not one per object: {object: its page's url}
    for those ``request``'s user may open (None and unregistered models are left out)."""
    by_model = defaultdict(list)
    for obj in objs:
        if obj is not None and admin.site.is_registered(type(obj)):
            by_model[type(obj)].append(obj)
    urls = {}
    for model, group in by_model.items():
        model_admin = admin.site.get_model_admin(model)
        group = [obj for obj in group if model_admin.has_view_permission(request, obj)]
        if not group:
            continue
        listed = set(
            model_admin.get_queryset(request).filter(pk__in={obj.pk for obj in group}).values_list("pk", flat=True)
        )
        name = f"admin:{model._meta.app_label}_{model._meta.model_name}_change"
        urls.update({obj: reverse(name, args=[obj.pk]) for obj in group if obj.pk in listed})
    return urls


def _pre(value: str):
    """A block of untrusted text, escaped (format_html escapes the argument)."""
    return format_html('<pre style="white-space: pre-wrap; max-width: 100ch">{}</pre>', value)


def risk_badge(level: str, label: str):
    """Risk as a visual level: coloured by the stylesheet's .risk-<level> (low green → critical black)."""
    return format_html('<span class="scout-risk risk-{}">{} risk</span>', level, label)


class SharedToolReadOnlyMixin:
    """A shared server's tool, once there are tenants, is shaped by a superuser alone (``tool_shaped_by``): its page
    is read-only for everyone else and says why in ``shared_tool_note``. For admins of models with a ``tool``."""

    shared_tool_note = ""

    def get_fieldsets(self, request, obj=None):
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None or tool_shaped_by(user=request.user, tool=obj.tool):
            return fieldsets
        [(name, options), *rest] = fieldsets
        return [(name, {**options, "description": self.shared_tool_note}), *rest]

    def has_change_permission(self, request, obj=None) -> bool:
        if obj is not None and not tool_shaped_by(user=request.user, tool=obj.tool):
            return False
        return super().has_change_permission(request, obj)
