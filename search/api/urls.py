from django.urls import path

from . import views

urlpatterns = [
    path(
        "tools/<path:tool_id>/learned-requests/",
        views.ToolLearnedRequestList.as_view(),
        name="tool-learned-requests",
    ),
]
