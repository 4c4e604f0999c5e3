"""Search over REST. Thin on purpose: it calls the one function the MCP ``tool_search`` calls, so visibility,
ranking, confidence, the answer's shape and the audit event are the same; re-point it there if that moves."""

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.authentication import request_principal
from governance.choices import OperationClass
from governance.constants import SCOPE_DISCOVER
from search.services import MAX_ENVIRONMENT_CHARS, SCOPES, TOP_K_DEFAULT, TOP_K_MAX, TOP_K_MIN

from ..services.discovery import GatewayInputError, gateway_search


class SearchRequestSerializer(serializers.Serializer):
    # Length and limits are checked by search itself (the one place), so the error matches tool_search's.
    query = serializers.CharField(help_text="The step you need a tool for, in plain words")
    top_k = serializers.IntegerField(min_value=TOP_K_MIN, max_value=TOP_K_MAX, default=TOP_K_DEFAULT)
    operation_class = serializers.ChoiceField(choices=OperationClass.values, required=False, allow_null=True)
    environment = serializers.CharField(max_length=MAX_ENVIRONMENT_CHARS, required=False, allow_null=True)
    scope = serializers.ChoiceField(choices=list(SCOPES), default="all")


class KeyInputSerializer(serializers.Serializer):
    name = serializers.CharField()
    type = serializers.CharField()
    required = serializers.BooleanField()


class SearchMatchSerializer(serializers.Serializer):
    tool_id = serializers.CharField()
    server = serializers.CharField()
    title = serializers.CharField()
    summary = serializers.CharField()
    key_inputs = KeyInputSerializer(many=True)
    risk = serializers.CharField()
    operation_class = serializers.CharField()
    why_matched = serializers.ListField(child=serializers.CharField())
    input_schema = serializers.JSONField()


class SearchAnswerSerializer(serializers.Serializer):
    matches = SearchMatchSerializer(many=True)
    confidence = serializers.ChoiceField(
        choices=["high", "low", "none"], help_text="high; low (check the schemas or rephrase); none (no tool fits)"
    )
    degraded = serializers.BooleanField(help_text="Answered by a fallback (no index, or the model unavailable)")
    abstained = serializers.BooleanField(help_text="No tool was confident enough to show")


class Search(generics.GenericAPIView):
    required_scopes = (SCOPE_DISCOVER,)
    serializer_class = SearchRequestSerializer

    @extend_schema(
        summary="Find tools for one step (the same answer as the MCP tool_search)",
        request=SearchRequestSerializer,
        responses={200: SearchAnswerSerializer},
    )
    def post(self, request: Request) -> Response:
        data = SearchRequestSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            answer = gateway_search(principal=request_principal(request), client="api", **data.validated_data)
        except GatewayInputError as exc:
            raise ValidationError({"query": [str(exc)]}) from None
        return Response(answer.structured())
