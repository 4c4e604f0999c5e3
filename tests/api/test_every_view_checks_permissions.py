"""Every REST view says, for each method it serves, which model permissions it needs or why it needs none
(Z11-style meta-test), and ApiAccess refuses a method a view serves but declares neither way: a handler added
without a permission fails closed."""

import pytest
from rest_framework.response import Response
from rest_framework.views import APIView

from tests.api.conftest import api_db, make_token

# Views that do not use ApiAccess, each on purpose: the JSON 404 for unknown routes, the schema and its docs pages
# (they describe the API, never its data).
NOT_API_ACCESS = {"UnknownRoute", "SpectacularAPIView", "SpectacularSwaggerView", "SpectacularRedocView"}


def drf_views() -> dict[str, type[APIView]]:
    """Every DRF view class in the URLconf (scoutsite/urls.py and each app's api.urls), by route."""
    from django.urls import URLPattern, URLResolver, get_resolver

    views: dict[str, type[APIView]] = {}

    def walk(patterns, prefix: str) -> None:
        for pattern in patterns:
            if isinstance(pattern, URLResolver):
                walk(pattern.url_patterns, prefix + str(pattern.pattern))
            elif isinstance(pattern, URLPattern):
                view = getattr(pattern.callback, "cls", None)
                if isinstance(view, type) and issubclass(view, APIView):
                    views[prefix + str(pattern.pattern)] = view

    walk(get_resolver().url_patterns, "")
    return views


def served_methods(view: type[APIView]) -> set[str]:
    """The methods the view answers other than with 405, OPTIONS aside; HEAD runs the GET handler."""
    names = {name for name in view.http_method_names if name not in ("options", "head") and hasattr(view, name)}
    return {name.upper() for name in names}


def test_every_method_of_every_api_view_needs_model_permissions_or_says_why_not():
    from governance.api.permissions import ApiAccess

    views = drf_views()
    assert len(views) >= 20
    undeclared, unchecked = [], []
    for route, view in views.items():
        if ApiAccess not in view.permission_classes:
            if view.__name__ not in NOT_API_ACCESS:
                unchecked.append(f"{route} {view.__name__}")
            continue
        required = getattr(view, "required_perms", {})
        reasons = getattr(view, "no_model_perms", {})
        assert not set(required) & set(reasons), (route, "both needs and does not need model permissions")
        assert all(reason.strip() for reason in reasons.values()), (route, "a method without a reason")
        assert set(required) | set(reasons) <= served_methods(view), (route, "declares a method it does not serve")
        undeclared += [
            f"{m} {route} {view.__name__}" for m in sorted(served_methods(view) - set(required) - set(reasons))
        ]
    assert undeclared == [], "methods with neither required_perms nor a no_model_perms reason"
    assert unchecked == [], "DRF views without ApiAccess"


@api_db
@pytest.mark.parametrize("view_path", ["catalog.api.views.ServerArchive", "governance.api.views.TokenRevoke"])
def test_a_handler_added_without_a_permission_is_refused(api, superuser, monkeypatch, view_path):
    """A DELETE handler added to a view (with required_perms, and without): even a superuser is refused (403), where
    before it ran (204); PUT, still without a handler, is a 405 as before."""
    from django.utils.module_loading import import_string

    def delete(self, request, *args, **kwargs):
        return Response(status=204)

    monkeypatch.setattr(import_string(view_path), "delete", delete, raising=False)
    token = make_token(superuser, ["api"])
    path = "servers/anything/archive/" if "Server" in view_path else "tokens/1/revoke/"
    assert api.request("DELETE", path, token=token).status_code == 403
    assert api.request("PUT", path, token=token).status_code == 405
