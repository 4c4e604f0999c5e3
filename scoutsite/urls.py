from django.contrib import admin
from django.urls import include, path

from search.preview import urls as search_preview_urls
from search.workbench import urls as search_workbench_urls

admin.site.site_header = "Scout"
admin.site.site_title = "Scout admin"
admin.site.index_title = "Catalog, search and governance"

urlpatterns = [
    *search_preview_urls(),  # /admin/search/preview/: before admin.site.urls, which would claim the path
    *search_workbench_urls(),  # /admin/search/workbench/
    path("admin/", admin.site.urls),
    path("api/v1/", include("scoutsite.api.urls")),  # REST API; schema at /api/v1/schema/, docs at /api/v1/docs/
]
