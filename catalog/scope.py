"""Which servers a caller may see and manage is governance's business (tenants, Z12). Catalog asks through this
one hook, which governance sets when it loads: dependencies point catalog <- governance, so catalog never
imports it (as the admin's server lists are narrowed by governance re-registering them)."""

from collections.abc import Callable

from django.db.models import Q

_scope: Callable[[object], Q] | None = None


def server_scope_set(scope: Callable[[object], Q]) -> None:
    """Set the filter on Server that says which servers the caller of a request may see (governance's)."""
    global _scope
    _scope = scope


def server_scope_q(request: object) -> Q:
    """A filter on Server: the servers the caller of ``request`` may see. None of them until the hook is set
    (fail closed)."""
    if _scope is None:
        return Q(pk__in=[])
    return _scope(request)


_counted: Callable[[object], Q] | None = None


def tool_count_scope_set(counted: Callable[[object], Q]) -> None:
    """Set the filter on a server's tools (``tools__`` lookups) saying which its caller may count (governance's)."""
    global _counted
    _counted = counted


def tool_count_q(request: object) -> Q:
    """A filter on a server's tools, through ``tools__``: the ones a server's tool count shows the caller of
    ``request``. Every tool until governance narrows it (a token acting for an agent counts what its agent sees)."""
    return _counted(request) if _counted is not None else Q()


_locked: Callable[[object, object], frozenset[str]] | None = None


def server_fields_locked_set(locked: Callable[[object, object], frozenset[str]]) -> None:
    """Set the function saying which server fields the caller of a request may not set (governance's)."""
    global _locked
    _locked = locked


def server_fields_locked(request: object, server: object) -> frozenset[str]:
    """The fields of ``server`` (None: a new one) the caller of ``request`` may not set: environment variables and
    commands once there are tenants, unless a superuser; a shared server's connection (governance decides)."""
    return _locked(request, server) if _locked is not None else frozenset()


_locked_many: Callable[[object, list], dict[int, frozenset[str]]] | None = None


def servers_fields_locked_set(locked: Callable[[object, list], dict[int, frozenset[str]]]) -> None:
    """Set the function saying ``server_fields_locked`` for many servers at once (governance's)."""
    global _locked_many
    _locked_many = locked


def servers_fields_locked(request: object, servers: list) -> dict[int, frozenset[str]]:
    """``server_fields_locked`` of each of ``servers`` (stored ones, as just read), by pk, for a page of a list: in a
    fixed number of queries where governance says so, rather than a few per row."""
    if _locked_many is not None:
        return _locked_many(request, servers)
    return {server.pk: server_fields_locked(request, server) for server in servers}


_claim: Callable[[object, object], None] | None = None


def server_claim_set(claim: Callable[[object, object], None]) -> None:
    """Set the function that gives a server the caller of a request registered its owner (governance's)."""
    global _claim
    _claim = claim


def server_claim(request: object, server: object) -> None:
    """After the caller of ``request`` registered ``server``, in the same transaction: give it the caller's tenant
    when they may not register a server shared by every tenant, or refuse (governance decides; raises its error)."""
    if _claim is not None:
        _claim(request, server)
