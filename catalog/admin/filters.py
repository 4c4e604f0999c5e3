"""Named list filters shared by the catalog admin pages."""

from datetime import timedelta

from django.contrib import admin
from django.db.models import Count, Exists, F, OuterRef, Q, QuerySet
from django.http import HttpRequest
from django.utils import timezone

from catalog.choices import Transport
from catalog.models import Server, ToolExample

SERVER_FILTER_CHOICES = 100


class ServerFilter(admin.SimpleListFilter):
    """By server slug. Lists the first servers only (a catalog may hold thousands); any slug works in the URL."""

    title = "server"
    parameter_name = "server"
    server_path = "server"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        # An admin may narrow the servers it offers (governance: the ones this person may manage).
        managed = getattr(model_admin, "managed_servers", None)
        servers = managed(request) if managed is not None else Server.objects.all()
        slugs = list(servers.order_by("slug").values_list("slug", flat=True)[:SERVER_FILTER_CHOICES])
        selected = self.value()
        if selected and selected not in slugs:
            slugs.insert(0, selected)
        return [(slug, slug) for slug in slugs]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value():
            return queryset.filter(**{f"{self.server_path}__slug": self.value()})
        return queryset


class RevisionServerFilter(ServerFilter):
    server_path = "tool__server"


def held_q(prefix: str = "") -> Q:
    """Tools no client gets until a review decides: held, never accepted, or changed since acceptance.

    Mirrors governance's fail-closed visibility (a tool is served only when its policy exists, is not held and
    accepted its current definition); named by lookup strings, so the catalog imports nothing upward."""
    return (
        Q(**{f"{prefix}policy__isnull": True})
        | Q(**{f"{prefix}policy__held": True})
        | ~Q(**{f"{prefix}policy__accepted_hash": F(f"{prefix}definition_hash")})
    )


def tool_count_annotations() -> dict[str, Count]:
    """A server's live and held tools, counted as the tool list's status filter ("Live", "Held for review") lists
    them: the server list and the operator's home annotate these, so their numbers match the lists they link."""
    return {
        "live_tool_count": Count(
            "tools", filter=Q(tools__removed_at__isnull=True, tools__enabled=True) & ~held_q("tools__")
        ),
        "held_tool_count": Count("tools", filter=Q(tools__removed_at__isnull=True) & held_q("tools__")),
    }


class ToolStatusFilter(admin.SimpleListFilter):
    title = "status"
    parameter_name = "status"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [
            ("live", "Live"),
            ("held", "Held for review"),
            ("removed", "Removed upstream"),
            ("disabled", "Disabled"),
        ]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value() == "live":
            return queryset.filter(removed_at__isnull=True, enabled=True).exclude(held_q())
        if self.value() == "held":
            return queryset.filter(removed_at__isnull=True).filter(held_q())
        if self.value() == "removed":
            return queryset.filter(removed_at__isnull=False)
        if self.value() == "disabled":
            return queryset.filter(removed_at__isnull=True, enabled=False)
        return queryset


class ExampleRequestsFilter(admin.SimpleListFilter):
    """Tools a curator has not yet given example requests (the curator home counts them)."""

    title = "example requests"
    parameter_name = "examples"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("none", "None yet"), ("some", "Some")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        has_examples = Exists(ToolExample.objects.filter(tool=OuterRef("pk")))
        if self.value() == "none":
            return queryset.exclude(has_examples)
        if self.value() == "some":
            return queryset.filter(has_examples)
        return queryset


class ChangedRecentlyFilter(admin.SimpleListFilter):
    """Tools whose upstream definition got a new revision recently (first sight counts as a change)."""

    title = "definition changed"
    parameter_name = "changed"
    windows = {"day": timedelta(days=1), "week": timedelta(days=7), "month": timedelta(days=30)}

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return [("day", "In the last day"), ("week", "In the last week"), ("month", "In the last 30 days")]

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        window = self.windows.get(self.value() or "")
        if window is None:
            return queryset
        return queryset.filter(last_changed_at__gte=timezone.now() - window)


class TransportFilter(admin.SimpleListFilter):
    title = "transport"
    parameter_name = "transport"

    def lookups(self, request: HttpRequest, model_admin: admin.ModelAdmin) -> list[tuple[str, str]]:
        return list(Transport.choices)

    def queryset(self, request: HttpRequest, queryset: QuerySet) -> QuerySet:
        if self.value():
            return queryset.filter(server__transport=self.value())
        return queryset
