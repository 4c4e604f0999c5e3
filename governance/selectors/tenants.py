"""Tenants (Z12): THE tenant rule (``tenant_q``) and the figures only a superuser reads once tenants exist."""

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Q

from catalog.models import Server

from ..models import ServerTenant, Tenant
from ..principals import Principal


def tenant_q(principal: Principal, field: str) -> Q:
    """THE tenant rule: rows whose ``field`` (a Tenant foreign key) is empty (shared) or one of the tenants
    ``principal`` acts in. Used for servers (``server__tenancy__tenant``), approvals and audit events."""
    shared = Q(**{f"{field}__isnull": True})
    if not principal.tenant_ids:
        return shared
    return shared | Q(**{f"{field}__in": sorted(principal.tenant_ids)})


def server_tenant_q(principal: Principal, prefix: str = "") -> Q:
    """``tenant_q`` on a server (``prefix`` leads from the queried model to the server, e.g. "tool__server__")."""
    return tenant_q(principal, f"{prefix}tenancy__tenant")


def server_tenant_id(server: Server) -> int | None:
    """The id of the tenant owning ``server``, or None when it is shared (no query if selected with
    ``select_related("tenancy")``)."""
    if Server.tenancy.is_cached(server):
        try:
            return server.tenancy.tenant_id
        except ServerTenant.DoesNotExist:
            return None
    return ServerTenant.objects.filter(server_id=server.pk).values_list("tenant_id", flat=True).first()


def install_wide_visible_to(*, user: AbstractBaseUser) -> bool:
    """Whether ``user`` may read figures of the whole install (the search index's generations and events: tool
    counts and ids across every tenant). A superuser may; anyone else only while the install has no tenants,
    so that a tenant's curator learns nothing of another tenant's catalog, not even its size (Z12)."""
    if getattr(user, "is_superuser", False):
        return True
    return not Tenant.objects.exists()
