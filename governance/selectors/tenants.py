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
    return not tenants_exist()


def tenants_exist() -> bool:
    """Whether the install has any tenant, read once per request (``request_memo``, emptied by
    ``visibility_invalidate``, which every tenant save or delete calls): a curator's admin home asked 9 times."""
    from ..cache import request_memo

    memo = request_memo()
    if "tenants_exist" not in memo:
        memo["tenants_exist"] = Tenant.objects.exists()
    return memo["tenants_exist"]


# Server fields that name the install's processes and environment (a stdio command, the variables holding
# credentials), and those that say where a server's calls, with the credentials it names, go.
INSTALL_ENVIRONMENT_FIELDS = ("command", "args", "env_vars", "header_env", "openapi_credentials")
CONNECTION_TARGET_FIELDS = ("transport", "url", "base_url", "openapi_url")
# Every server field an operator sets (admin form and REST): what a shared server's callers read, rank by and reach.
SERVER_FIELDS = (
    "name",
    "description",
    "category",
    "environment",
    "status",
    "alternatives",  # which servers' copies it may publish unheld (every tenant's search capture defence)
    "openapi_upload",
    "openapi_document",
    *CONNECTION_TARGET_FIELDS,
    *INSTALL_ENVIRONMENT_FIELDS,
)


def shared_shaped_by(*, user: AbstractBaseUser) -> bool:
    """Whether ``user`` may create or change what every tenant shares (a shared server, its tools' curation): only
    someone who may act for every tenant (``install_wide_visible_to``: a superuser, or anyone while the install has
    no tenants). Otherwise tenant A's operator or curator would shape tenant B's ranking, or lure B's agents to an
    upstream of A's choosing, through a server B cannot tell apart from any other shared one."""
    return install_wide_visible_to(user=user)


def servers_registrable_by(*, user: AbstractBaseUser) -> bool:
    """Whether ``user`` may register a server at all: one who may shape what every tenant shares
    (``shared_shaped_by``), or a member of a tenant (their new server is that tenant's). Anyone else, once the
    install has tenants, has no tenant to give it and may not share it with every tenant."""
    return shared_shaped_by(user=user) or user.tenants.exists()


def server_fields_locked(*, user: AbstractBaseUser, server: Server | None) -> frozenset[str]:
    """The fields of ``server`` (None: a new one) that ``user`` may not set. Once an install has tenants, only a
    superuser names environment variables and commands: the gateway's processes serve every tenant and hold every
    tenant's credentials and Scout's own secrets, so a variable named by tenant A's operator could be any of them
    (sent to a URL of theirs), and a command runs beside them all (T14). A shared server is every tenant's: none of
    its fields is a tenant operator's to set (``shared_shaped_by``), not its connection (its credentials would
    follow it), nor its name, description or OpenAPI document (every tenant's ranking), nor its status. A tenant's own
    server that carries variables a superuser named is moved by a superuser too: its credentials would follow a URL
    of the operator's choosing, to a host of theirs. Nothing is locked for a superuser, nor in an install without
    tenants (whose operators configure it, as before tenants)."""
    if shared_shaped_by(user=user):
        return frozenset()
    if server is None or server.pk is None:
        return frozenset(INSTALL_ENVIRONMENT_FIELDS)
    shared = server_tenant_id(server) is None
    return _fields_locked(shared=shared, names_variables=not shared and server_names_variables(server))


def servers_fields_locked(*, user: AbstractBaseUser, servers: list[Server]) -> dict[int, frozenset[str]]:
    """``server_fields_locked`` for each of ``servers`` (stored ones, as just read from the database), by pk, in a
    fixed number of queries: a list of servers asked three queries a row of a tenant's operator (adminux25)."""
    if shared_shaped_by(user=user):
        return {server.pk: frozenset() for server in servers}
    owned = set(ServerTenant.objects.filter(server__in=servers).values_list("server_id", flat=True))
    return {
        server.pk: _fields_locked(
            shared=server.pk not in owned,
            names_variables=any((server.env_vars, server.header_env, server.openapi_credentials)),
        )
        for server in servers
    }


def _fields_locked(*, shared: bool, names_variables: bool) -> frozenset[str]:
    if shared:
        return frozenset(SERVER_FIELDS)
    if names_variables:
        return frozenset((*INSTALL_ENVIRONMENT_FIELDS, *CONNECTION_TARGET_FIELDS))
    return frozenset(INSTALL_ENVIRONMENT_FIELDS)


def server_names_variables(server: Server) -> bool:
    """Whether ``server``, as stored, names environment variables (its credentials: values only Scout reads)."""
    stored = Server.objects.filter(pk=server.pk).values_list("env_vars", "header_env", "openapi_credentials").first()
    return stored is not None and any(stored)
