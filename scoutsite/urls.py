from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

from scoutsite.dashboard import urls as dashboard_urls
from scoutsite.health import healthz, readyz
from scoutsite.metrics import metrics_view
from search.preview import urls as search_preview_urls
from search.workbench import urls as search_workbench_urls

admin.site.site_header = "Scout"
admin.site.site_title = "Scout admin"
admin.site.index_title = "Catalog, search and governance"

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("readyz", readyz, name="readyz"),
    path("metrics", metrics_view, name="metrics"),
    *search_preview_urls(),  # /admin/search/preview/: before admin.site.urls, which would claim the path
    *search_workbench_urls(),  # /admin/search/workbench/
    *dashboard_urls(),  # /admin/dashboard/: operators' charts
    path("admin/", admin.site.urls),
    # The admin is the product: the site root (and the admin's "View site" link) lead to it, not to a 404.
    path("", RedirectView.as_view(pattern_name="admin:index"), name="home"),
    path("api/v1/", include("scoutsite.api.urls")),  # REST API; schema at /api/v1/schema/, docs at /api/v1/docs/
]
