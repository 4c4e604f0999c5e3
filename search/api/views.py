"""Learned requests of one tool, for curators (never shown to searchers: they are other users' words)."""

from django.db.models import QuerySet
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.authentication import request_principal
from governance.api.selectors import tool_get_for_api
from governance.constants import SCOPE_DISCOVER
from governance.selectors import ToolNotFound
from search.models import LearnedRequest


class LearnedRequestSerializer(serializers.ModelSerializer):
    class Meta:
        model = LearnedRequest
        fields = ("id", "text", "status", "confirmations", "principal_count", "first_seen", "last_seen", "indexed")
        read_only_fields = fields


class ToolLearnedRequestList(generics.ListAPIView):
    required_scopes = (SCOPE_DISCOVER,)
    required_perms = {"GET": ("search.view_learnedrequest",)}
    person_only = True  # other people's words: a curator reads them, never their agent, a searcher (Z8)
    serializer_class = LearnedRequestSerializer

    def get_queryset(self) -> QuerySet[LearnedRequest]:
        try:
            tool = tool_get_for_api(principal=request_principal(self.request), tool_id=self.kwargs["tool_id"])
        except ToolNotFound:
            raise NotFound() from None
        return LearnedRequest.objects.filter(tool=tool).order_by("-principal_count", "-confirmations", "-id")

    @extend_schema(
        summary="Requests that led to successful calls of a tool (curators)",
        parameters=[OpenApiParameter("tool_id", str, OpenApiParameter.PATH, description="server::name, exactly")],
    )
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)
