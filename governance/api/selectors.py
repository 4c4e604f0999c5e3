"""Reads for the REST API, built on governance's visibility selector (the same one /mcp and search use)."""

from django.db.models import Q, QuerySet
from rest_framework.exceptions import PermissionDenied

from catalog.choices import ServerStatus
from catalog.models import Server, Tool, ToolRevision
from governance.choices import ReviewStatus
from governance.constants import SCOPE_DISCOVER, SERVER_SCOPE_PREFIX
from governance.models import ApiToken, ApprovalRequest, ServerTenant, ToolReview
from governance.principals import Principal
from governance.selectors import (
    MAX_TOOL_ID_LENGTH,
    ToolNotFound,
    agent_and_agents_below,
    approval_requests_for_approver,
    server_fields_locked,
    server_tenant_q,
    servers_fields_locked,
    servers_visible_to_operator,
    shared_shaped_by,
    tools_visible_to,
)

# Curators and operators see the catalog as the admin shows it (held and disabled tools too).
CATALOG_VIEW_PERMS = ("catalog.view_tool", "catalog.change_tool")


def principal_sees_catalog(*, principal: Principal) -> bool:
    """Whether the caller holds a model permission that shows every tool (as the admin does). Never a token of an
    agent: an agent sees the tools it may discover, as over /mcp (Z8), and never a held definition, the text a review
    keeps from agents (T6), whoever its person is; and only for staff, as the admin shows it (a person no longer staff
    sees what they may discover)."""
    user = principal.user
    if principal.agent_id is not None:
        return False
    return bool(user and user.is_active and user.is_staff and any(user.has_perm(perm) for perm in CATALOG_VIEW_PERMS))


def tools_for_api(*, principal: Principal) -> QuerySet[Tool]:
    """The tools the caller may see through the API, with the "discover" scope and the token's server limits.

    A curator (catalog.view_tool / change_tool) sees the catalog of its tenants (``server_tenant_q``), except the
    tools of archived servers; anyone
    else exactly what governance lets them discover (``tools_visible_to``), as in tool_search."""
    if not principal.has_scope(SCOPE_DISCOVER):
        return Tool.objects.none()
    if principal_sees_catalog(principal=principal):
        qs = Tool.objects.exclude(server__status=ServerStatus.ARCHIVED).filter(server_tenant_q(principal, "server__"))
        if principal.server_slugs is not None:
            qs = qs.filter(server__slug__in=sorted(principal.server_slugs))
    else:
        qs = tools_visible_to(principal=principal)
    return qs.select_related("server", "policy__risk_class").order_by("tool_id")


def tool_get_for_api(*, principal: Principal, tool_id: str) -> Tool:
    """The tool ``tool_id`` if the caller may see it through the API. Raises ToolNotFound otherwise, whether
    the tool is missing, hidden or forbidden."""
    if not isinstance(tool_id, str) or not tool_id or len(tool_id) > MAX_TOOL_ID_LENGTH or "\x00" in tool_id:
        raise ToolNotFound()
    tool = tools_for_api(principal=principal).filter(tool_id=tool_id).first()
    # Compare exact bytes: some database collations match case-insensitively.
    if tool is None or tool.tool_id != tool_id:
        raise ToolNotFound()
    return tool


def revisions_for_api(*, principal: Principal, tool: Tool) -> QuerySet[ToolRevision]:
    """``tool``'s upstream definitions the caller may read, newest first. A curator reads every one; anyone else only
    those accepted (at first sight, or by a curator): a held or rejected definition is the text the review keeps from
    agents (T6), and a tool that returned to its accepted definition is visible again with it among its revisions."""
    revisions = ToolRevision.objects.filter(tool=tool).order_by("-created_at", "-id")
    if principal_sees_catalog(principal=principal):
        return revisions
    reviews = ToolReview.objects.filter(tool=tool)
    accepted = reviews.filter(status=ReviewStatus.ACCEPTED).values("definition_hash")
    reviewed = reviews.values("definition_hash")
    return revisions.filter(
        Q(definition_hash=tool.policy.accepted_hash)
        | Q(definition_hash__in=accepted)
        | ~Q(definition_hash__in=reviewed)
    )


def servers_in_api_scope(request) -> Q:
    """Which servers the catalog API shows its caller (governance sets it as ``catalog.scope``'s hook): a token acts
    in its tenant, so it sees shared servers and that tenant's (``server_tenant_q``, as ``tool_search`` does, a
    superuser's token too), a token acting for an agent only those whose tools the agent may discover; a session sees
    the servers its person may manage (``servers_visible_to_operator``: a superuser every server, as in the admin)."""
    if isinstance(request.auth, Principal):
        if request.auth.agent_id is not None:
            # An agent's token manages no more than its agent may use (Z8), as its tools/ list is what it may discover.
            agent_servers = tools_visible_to(principal=request.auth).values("server_id")
            return server_tenant_q(request.auth) & Q(pk__in=agent_servers)
        return server_tenant_q(request.auth)
    return servers_visible_to_operator(user=request.user)


def tools_counted_for_request(request) -> Q:
    """``catalog.scope``'s tool-count hook: a token acting for an agent counts only the tools its agent may discover
    (its tools/ list; a held or ungranted tool counted there told it the tool exists); anyone else every live tool of
    the servers they manage."""
    if isinstance(request.auth, Principal) and request.auth.agent_id is not None:
        return Q(tools__in=tools_visible_to(principal=request.auth).values("pk"))
    return Q()


def server_fields_locked_for_request(request, server) -> frozenset[str]:
    """``catalog.scope``'s hook: the server fields the person behind ``request`` may not set (a token's too)."""
    return server_fields_locked(user=request.user, server=server)


def servers_fields_locked_for_request(request, servers: list[Server]) -> dict[int, frozenset[str]]:
    """``catalog.scope``'s hook for a list: ``server_fields_locked_for_request`` of each stored server, by pk."""
    return servers_fields_locked(user=request.user, servers=servers)


def server_claim_for_request(request, server: Server) -> None:
    """``catalog.scope``'s hook, after ``server`` was registered through the REST API: a server shared by every
    tenant is registered only by someone who may shape what they share (``shared_shaped_by``); anyone else's is
    their tenant's: the token's, or a session's one tenant. A token acting for an agent registers none: a server's
    command runs on this host, an operator's act, not their agent's (Z8); a token limited to servers only one of
    them. Raises PermissionDenied otherwise (the caller rolls the registration back)."""
    if isinstance(request.auth, Principal) and request.auth.agent_id is not None:
        raise PermissionDenied(
            "A token acting for an agent does not register servers: use a token of your own, with no agent.",
            code="permission_denied",
        )
    slugs = request.auth.server_slugs if isinstance(request.auth, Principal) else None
    if slugs is not None and server.slug not in slugs:
        # Else it registered (and committed) a server it cannot reach, whose command the next scheduled sync starts.
        raise PermissionDenied(
            "A token limited to servers registers only a server it is limited to (a server:<slug> scope).",
            code="permission_denied",
        )
    if shared_shaped_by(user=request.user):
        return
    if isinstance(request.auth, Principal):
        tenant_id = request.auth.tenant_id
    else:
        tenant_ids = list(request.user.tenants.values_list("pk", flat=True)[:2])
        tenant_id = tenant_ids[0] if len(tenant_ids) == 1 else None
    if tenant_id is None:
        raise PermissionDenied(
            "A server shared by every tenant is registered by a superuser: use a token acting in your tenant, "
            "whose server it will be.",
            code="permission_denied",
        )
    ServerTenant.objects.create(server=server, tenant_id=tenant_id)


def approvals_for_api(*, principal: Principal) -> QuerySet[ApprovalRequest]:
    """The caller's approver inbox, within what the token may reach (``approval_requests_for_approver``)."""
    return approval_requests_for_approver(user=principal.user, principal=principal)


def scopes_beyond(*, principal: Principal, scopes: list[str]) -> str | None:
    """Why a token of ``scopes`` could do more than the token ``principal`` acts with: ``"scopes"`` (a base scope it
    lacks), ``"servers"`` (a server it is not limited to, or no server limit under a limited token), else None."""
    base = {s for s in scopes if not s.startswith(SERVER_SCOPE_PREFIX)}
    if not base <= principal.scopes:
        return "scopes"
    if principal.server_slugs is not None:
        wanted = {s[len(SERVER_SCOPE_PREFIX) :] for s in scopes if s.startswith(SERVER_SCOPE_PREFIX)}
        if not wanted or not wanted <= principal.server_slugs:
            return "servers"
    return None


def api_tokens_of(*, principal: Principal) -> QuerySet[ApiToken]:
    """The caller's own tokens, newest first. A token reaches only those it could have minted (Z8, as
    ``_check_within_caller`` in views.py): of its tenant, of its agent or one below it, within its scopes and server
    limits (``scopes_beyond``); a session, all of them. Not by expiry: a token of the same rights made a moment
    later outlives it by as much, and reaching it gives the caller nothing it cannot already do."""
    tokens = ApiToken.objects.filter(user=principal.user).order_by("-created_at", "-id")
    if principal.token_id is None:
        return tokens
    tokens = tokens.filter(tenant_id=principal.tenant_id)
    if principal.agent_id is not None:
        tokens = tokens.filter(agent_id__in=agent_and_agents_below(principal.agent_id, user=principal.user))
    # Scopes are a JSON list: compared here, the same way on every database (a person's tokens are few).
    rows = tokens.values_list("pk", "scopes")
    within = [pk for pk, scopes in rows if scopes_beyond(principal=principal, scopes=scopes) is None]
    return tokens.filter(pk__in=within)
