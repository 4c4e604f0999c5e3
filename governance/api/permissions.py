"""Access to the REST API: the "api" scope, each view's scopes, and the Django model permissions it names.

Views declare what they need; this class holds the checks (views hold no policy):
- ``required_scopes``: token scopes on top of "api" (discover for tools and search, approve for approvals);
- ``required_perms``: ``{"GET": ("catalog.view_server",), "POST": (...)}`` model permissions of the user (and of
  whoever issued the token, when someone else did);
- ``require_staff``: the user must be staff (the audit trail, as in the admin).
Object visibility is not decided here but by governance's selectors, so a hidden object is a plain 404.
"""

from django.contrib.auth import get_user_model
from rest_framework.exceptions import PermissionDenied
from rest_framework.permissions import BasePermission
from rest_framework.request import Request

from governance.constants import SCOPE_API

from .authentication import request_principal


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
        perms = getattr(view, "required_perms", {}).get(method, ())
        if perms and not (user.has_perms(perms) and _issuer_may(principal, perms)):
            raise PermissionDenied("You do not have permission to do this.", code="permission_denied")
        return True


def _issuer_may(principal, perms) -> bool:
    """A token someone else issued (its raw value was shown to them) carries only the model permissions its issuer
    holds too: an operator issuing a token for a curator must not curate through it."""
    if principal.issued_by_id is None:
        return True
    issuer = get_user_model().objects.filter(pk=principal.issued_by_id, is_active=True).first()
    return issuer is not None and issuer.has_perms(perms)
