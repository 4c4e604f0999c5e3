"""Every REST route under /api/v1/: each app's ``api.urls``, the OpenAPI schema and its docs pages."""

from django.urls import include, path, re_path
from drf_spectacular.utils import extend_schema
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView
from rest_framework.exceptions import NotFound
from rest_framework.permissions import AllowAny
from rest_framework.views import APIView


@extend_schema(exclude=True)
class UnknownRoute(APIView):
    """Any other path under /api/v1/: the API's JSON 404, not Django's HTML page."""

    permission_classes = (AllowAny,)

    def get(self, request, *args, **kwargs):
        raise NotFound()

    post = put = patch = delete = get


# The schema and the docs are public: they describe the API, never its data.
docs = {"permission_classes": [AllowAny], "authentication_classes": []}

urlpatterns = [
    # learned-requests first: governance's tools/<path:tool_id>/ would otherwise match it.
    path("", include("search.api.urls")),
    path("", include("governance.api.urls")),
    path("", include("catalog.api.urls")),
    path("", include("mcpgateway.api.urls")),
    path("schema/", SpectacularAPIView.as_view(**docs), name="api-schema"),
    path("docs/", SpectacularSwaggerView.as_view(url_name="api-schema", **docs), name="api-docs"),
    path("redoc/", SpectacularRedocView.as_view(url_name="api-schema", **docs), name="api-redoc"),
    re_path(r"^.*$", UnknownRoute.as_view(), name="api-unknown"),
]
