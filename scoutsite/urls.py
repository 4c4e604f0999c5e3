from django.contrib import admin
from django.urls import path

admin.site.site_header = "Scout"
admin.site.site_title = "Scout admin"
admin.site.index_title = "Catalog, search and governance"

urlpatterns = [
    path("admin/", admin.site.urls),
]
