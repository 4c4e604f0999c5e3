"""Search over REST. Thin on purpose: it calls the one function the MCP ``tool_search`` calls, so visibility,
ranking, confidence, the answer's shape and the audit event are the same; re-point it there if that moves."""

from collections.abc import Mapping

from drf_spectacular.utils import extend_schema
from rest_framework import generics, serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from governance.api.authentication import request_principal
from governance.choices import OperationClass
from governance.constants import SCOPE_DISCOVER
from search.engine.ranking import Confidence
from search.services import SCOPES, TOP_K_DEFAULT, TOP_K_MAX, TOP_K_MIN

from ..services.discovery import GatewayInputError, gateway_search


class SearchRequestSerializer(serializers.Serializer):
    """The request as documented in the schema. Not used to validate: search validates every field itself
    (``search.services.search_for_principal``, the one place), so the REST and MCP answers and errors agree."""

    query = serializers.CharField(help_text="The step you need a tool for, in plain words")
    top_k = serializers.IntegerField(
        default=TOP_K_DEFAULT, help_text=f"How many tools to return (clamped to {TOP_K_MIN}-{TOP_K_MAX})"
    )
    operation_class = serializers.CharField(
        required=False, allow_null=True, help_text="One of: " + ", ".join(OperationClass.values)
    )
    environment = serializers.CharField(required=False, allow_null=True, help_text="e.g. production")
    scope = serializers.CharField(default="all", help_text="One of: " + ", ".join(SCOPES))


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
    needs_approval = serializers.BooleanField(
        required=False, help_text="Only when true: every call of this tool waits for an approver"
    )
    deprecated = serializers.BooleanField(
        required=False, help_text="Only when true: its upstream marks it deprecated (use another if one fits)"
    )
    why_matched = serializers.ListField(child=serializers.CharField())
    input_schema = serializers.JSONField(
        required=False, help_text="Not in a low-confidence answer (none clearly fits): GET tools/{tool_id}/ gives it"
    )


class SearchAnswerSerializer(serializers.Serializer):
    matches = SearchMatchSerializer(many=True)
    confidence = serializers.ChoiceField(
        choices=[c.value for c in Confidence],
        help_text="high; low (none clearly fits: no input schemas, key inputs only); none (no tool fits)",
    )
    degraded = serializers.BooleanField(help_text="Answered by a fallback (no index, or the model unavailable)")
    abstained = serializers.BooleanField(help_text="No tool was confident enough to show")
    notes = serializers.ListField(
        child=serializers.CharField(),
        required=False,
        help_text="Only when there are any: lines about the request itself (e.g. top_k capped at the maximum)",
    )
    server_descriptions = serializers.DictField(
        child=serializers.CharField(),
        required=False,
        help_text="Only when there are any: per server of the matches shown with an input schema, its operator's "
        "note (it may say what the tools' arguments refer to)",
    )


class Search(generics.GenericAPIView):
    no_model_perms = {"POST": "gateway_search: the caller's grants decide which tools are searched, as over MCP"}
    required_scopes = (SCOPE_DISCOVER,)
    serializer_class = SearchRequestSerializer

    @extend_schema(
        summary="Find tools for one step (the same answer as the MCP tool_search)",
        request=SearchRequestSerializer,
        responses={200: SearchAnswerSerializer},
    )
    def post(self, request: Request) -> Response:
        if not isinstance(request.data, Mapping):
            raise ValidationError({"query": ["send a JSON object with a query"]})
        fields = {name: request.data[name] for name in SearchRequestSerializer().fields if name in request.data}
        if "query" not in fields:
            raise ValidationError({"query": ["query is required: the step you need a tool for"]})
        try:
            answer = gateway_search(principal=request_principal(request), client="api", **fields)
        except GatewayInputError as exc:
            raise ValidationError({exc.field or "query": [str(exc)]}) from None
        return Response(answer.structured())
