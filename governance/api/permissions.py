"""Access to the REST API: the "api" scope, each view's scopes, and the Django model permissions it names.

Views declare what they need; this class holds the checks (views hold no policy):
- ``required_scopes``: token scopes on top of "api" (discover for tools and search, approve for approvals);
- ``required_perms``: ``{"GET": ("catalog.view_server",), "POST": (...)}`` model permissions of the user (and of
  whoever issued the token, when someone else did), who must be staff: as in the admin, where only staff use them,
  so a person whose staff status was taken away uses them through no token either;
- ``no_model_perms``: ``{"GET": "why"}`` the methods that need no model permission, each with its reason (what
  the caller sees is decided by a selector, or is the caller's own);
- ``require_staff``: the user must be staff (the audit trail, as in the admin);
- ``person_only``: a token acting for an agent is refused even the view's reads (other people's words).
A token acting for an agent never uses its person's model permissions to change anything (``required_perms`` on a
method other than GET, HEAD or OPTIONS): a server's command, address and archiving, a tool's curation are the
operator's or curator's own acts, not an agent's one prompt injection away from a tool's output (Z8, T14).
A method a view serves that is in neither ``required_perms`` nor ``no_model_perms`` is refused (403): a handler
added without a permission fails closed. OPTIONS describes the view (DRF checks POST/PUT for the actions it lists).
Object visibility is not decided here but by governance's selectors, so a hidden object is a plain 404.
"""

from django.contrib.auth import get_user_model
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import SAFE_METHODS, BasePermission
from rest_framework.request import Request

from governance.constants import SCOPE_API

from .authentication import request_principal

AGENT_TOKEN_REFUSAL = (
    "A token acting for an agent does not do this: it needs its person's own rights. Use a token of your own, with "
    "no agent."
)


class ApiAccess(BasePermission):
    def has_permission(self, request: Request, view) -> bool:
        user = request.user
        if user is None or not user.is_authenticated or not user.is_active:
            return False  # DRF answers 401 (NotAuthenticated) for an anonymous caller
        principal = request_principal(request)
        needed = (SCOPE_API, *getattr(view, "required_scopes", ()))
        missing = [scope for scope in needed if not principal.has_scope(scope)]
        if missing:
            raise PermissionDenied(f"The token lacks the scope(s): {', '.join(missing)}.", code="insufficient_scope")
        if getattr(view, "require_staff", False) and not user.is_staff:
            raise PermissionDenied("Staff only.", code="permission_denied")
        # A HEAD request runs the GET handler (Django answers it with GET's headers, Content-Length among them), so it
        # needs GET's permissions: with none of its own it read the size of what GET refuses.
        method = "GET" if request.method == "HEAD" else request.method
        if method == "OPTIONS" or not _serves(view, method):
            return True  # OPTIONS describes the view; a method without a handler answers 405
        if method in getattr(view, "no_model_perms", {}):
            return True
        perms = getattr(view, "required_perms", {}).get(method)
        if not perms or not (user.is_staff and user.has_perms(perms) and _issuer_may(principal, perms)):
            raise PermissionDenied("You do not have permission to do this.", code="permission_denied")
        if principal.agent_id is not None and (method not in SAFE_METHODS or getattr(view, "person_only", False)):
            raise PermissionDenied(AGENT_TOKEN_REFUSAL, code="permission_denied")
        return True


def _serves(view, method: str) -> bool:
    return method.lower() in view.http_method_names and hasattr(view, method.lower())


def _issuer_may(principal, perms) -> bool:
    """A token someone else issued (its raw value was shown to them) carries only the model permissions its issuer
    holds too: an operator issuing a token for a curator must not curate through it."""
    if principal.issued_by_id is None:
        return True
    issuer = get_user_model().objects.filter(pk=principal.issued_by_id, is_active=True).first()
    return issuer is not None and issuer.has_perms(perms)
