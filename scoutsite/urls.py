from django.contrib import admin
from django.urls import path
from django.views.generic import RedirectView

from search.preview import urls as search_preview_urls

admin.site.site_header = "Scout"
admin.site.site_title = "Scout admin"
admin.site.index_title = "Catalog, search and governance"

urlpatterns = [
    *search_preview_urls(),  # /admin/search/preview/: before admin.site.urls, which would claim the path
    path("admin/", admin.site.urls),
    # The admin is the product: the site root (and the admin's "View site" link) lead to it, not to a 404.
    path("", RedirectView.as_view(pattern_name="admin:index"), name="home"),
]
