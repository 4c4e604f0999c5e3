"""The catalog's admin pages narrowed to the servers an admin may manage (Z12): shared servers and those of
the admin's tenants; superusers see everything. The catalog knows nothing of tenants (dependencies point
catalog ← governance), so this module re-registers its ModelAdmins with the tenant filter (``access`` does it
for servers and tools, with their grant inlines)."""

from django.contrib import admin

from catalog.admin.records import SyncRunAdmin as CatalogSyncRunAdmin
from catalog.admin.records import ToolRevisionAdmin as CatalogToolRevisionAdmin
from catalog.models import Server, SyncRun, ToolRevision

from ..selectors import servers_visible_to_operator


class TenantScopedMixin:
    """Lists only rows of the servers the admin may manage (``server_path`` leads to the server)."""

    server_path = "server"

    def managed_servers(self, request):
        """Servers this admin may manage; also the choices of catalog's server filter."""
        return Server.objects.filter(servers_visible_to_operator(user=request.user))

    def get_queryset(self, request):
        qs = super().get_queryset(request)
        if request.user.is_superuser:
            return qs  # file imports' runs have no server: only superusers read those
        return qs.filter(**{f"{self.server_path}__in": self.managed_servers(request).values("pk")})


class ToolRevisionAdmin(TenantScopedMixin, CatalogToolRevisionAdmin):
    server_path = "tool__server"


class SyncRunAdmin(TenantScopedMixin, CatalogSyncRunAdmin):
    pass


for model, model_admin in ((ToolRevision, ToolRevisionAdmin), (SyncRun, SyncRunAdmin)):
    admin.site.unregister(model)
    admin.site.register(model, model_admin)
