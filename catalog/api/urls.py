from django.urls import path

from . import views

urlpatterns = [
    path("servers/", views.ServerList.as_view(), name="server-list"),
    path("servers/<str:slug>/", views.ServerDetail.as_view(), name="server-detail"),
    path("servers/<str:slug>/archive/", views.ServerArchive.as_view(), name="server-archive"),
    path("servers/<str:slug>/sync/", views.ServerSync.as_view(), name="server-sync"),
    path("sync-runs/", views.SyncRunList.as_view(), name="syncrun-list"),
    path("sync-runs/<int:pk>/", views.SyncRunDetail.as_view(), name="syncrun-detail"),
]
