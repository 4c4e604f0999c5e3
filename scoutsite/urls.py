from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic.base import RedirectView

from scoutsite.dashboard import urls as dashboard_urls
from scoutsite.health import healthz, readyz
from scoutsite.landing import landing_view
from scoutsite.metrics import metrics_view
from search.preview import urls as search_preview_urls
from search.unfound import urls as search_unfound_urls
from search.workbench import urls as search_workbench_urls

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    # Browsers ask for /favicon.ico on pages without an icon link (JSON, the API docs): the same small static icon.
    path("favicon.ico", RedirectView.as_view(url=static("scout/favicon.svg")), name="favicon"),
    *search_preview_urls(),  # /admin/search/preview/: before admin.site.urls, which would claim the path
    *search_workbench_urls(),  # /admin/search/workbench/
    *search_unfound_urls(),  # /admin/search/workbench/tools/: tools agents did not find
    *dashboard_urls(),  # /admin/dashboard/: operators' charts
    path("admin/", admin.site.urls),
    # The site root (and the admin's "View site" link): each role's way in and the MCP URL, never a 404.
    path("", landing_view, name="home"),
    path("api/v1/", include("scoutsite.api.urls")),  # REST API; schema at /api/v1/schema/, docs at /api/v1/docs/
]
