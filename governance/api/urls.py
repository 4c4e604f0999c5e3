from django.urls import path

from . import views

# Tool ids contain "::" and may contain "/": sub-resources come before the detail route, which would
# otherwise swallow them.
urlpatterns = [
    path("tools/", views.ToolList.as_view(), name="tool-list"),
    path("tools/<path:tool_id>/revisions/", views.ToolRevisionList.as_view(), name="tool-revisions"),
    path("tools/<path:tool_id>/curation/", views.ToolCuration.as_view(), name="tool-curation"),
    path("tools/<path:tool_id>/", views.ToolDetail.as_view(), name="tool-detail"),
    path("approvals/", views.ApprovalList.as_view(), name="approval-list"),
    path("approvals/deny/", views.ApprovalDenyMany.as_view(), name="approval-deny-many"),
    path("approvals/<str:approval_id>/", views.ApprovalDetail.as_view(), name="approval-detail"),
    path("approvals/<str:approval_id>/approve/", views.ApprovalApprove.as_view(), name="approval-approve"),
    path("approvals/<str:approval_id>/deny/", views.ApprovalDeny.as_view(), name="approval-deny"),
    path("tokens/", views.TokenList.as_view(), name="token-list"),
    path("tokens/<int:pk>/", views.TokenDetail.as_view(), name="token-detail"),
    path("tokens/<int:pk>/revoke/", views.TokenRevoke.as_view(), name="token-revoke"),
    path("audit/", views.AuditList.as_view(), name="audit-list"),
    path("audit/<int:pk>/", views.AuditDetail.as_view(), name="audit-detail"),
]
