"""Governance endpoints. Views only parse, call a selector or service, and shape the answer: who may see or do
what is decided by governance's selectors and services, as for the admin and /mcp."""

from django.db.models import QuerySet
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import APIException, NotFound, PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response

from catalog.api.params import param_choice
from catalog.models import Server, Tool, ToolRevision
from catalog.services.phrases import tool_curate
from governance.constants import SCOPE_APPROVE, SCOPE_DISCOVER
from governance.models import Agent, ApiToken, ApprovalRequest, AuditEvent, Tenant
from governance.principals import Principal
from governance.selectors import ToolNotFound, audit_events_visible_to, servers_shaped_by
from governance.services.approvals import (
    AGENT_DECIDES,
    AGENT_DECIDES_MESSAGE,
    ApprovalError,
    approval_decide,
    approval_deny_many,
)
from governance.services.tokens import api_token_create, api_token_revoke, scopes_validate

from .authentication import request_principal
from .filters import audit_filter, tools_filter
from .selectors import (
    api_tokens_of,
    approvals_for_api,
    revisions_for_api,
    scopes_beyond,
    tool_get_for_api,
    tools_for_api,
)
from .serializers import (
    APPROVAL_STATUS_FILTERS,
    ApiTokenCreatedSerializer,
    ApiTokenCreateSerializer,
    ApiTokenSerializer,
    ApprovalDecisionSerializer,
    ApprovalSerializer,
    AuditEventSerializer,
    BulkDenialResultSerializer,
    BulkDenialSerializer,
    CurationSerializer,
    DenialSerializer,
    ToolDetailSerializer,
    ToolRevisionShownSerializer,
    ToolSerializer,
)

TOOL_ID = OpenApiParameter("tool_id", str, OpenApiParameter.PATH, description="server::name, exactly")


def for_model(request: Request) -> bool:
    """Whether the caller is a token acting for an agent, which reads a tool's texts as a model is shown them
    (``tool_page_for_model``), not as the upstream wrote them."""
    return request_principal(request).agent_id is not None


def visible_tool(request: Request, tool_id: str) -> Tool:
    """The tool if the caller may see it; one 404 for unknown and hidden alike."""
    try:
        return tool_get_for_api(principal=request_principal(request), tool_id=tool_id)
    except ToolNotFound:
        raise NotFound() from None


# --- tools ----------------------------------------------------------------------------------------


class ToolList(generics.ListAPIView):
    no_model_perms = {"GET": "tools_for_api: only the tools the caller may discover"}
    required_scopes = (SCOPE_DISCOVER,)
    serializer_class = ToolSerializer

    def get_queryset(self) -> QuerySet[Tool]:
        return tools_filter(tools_for_api(principal=request_principal(self.request)), self.request.query_params)

    def get_serializer_context(self) -> dict:
        return {**super().get_serializer_context(), "for_model": for_model(self.request)}

    @extend_schema(
        summary="List the tools you may see",
        parameters=[
            OpenApiParameter("server", str, description="server slug"),
            OpenApiParameter("q", str, description="words in the id, titles, description, purpose or aliases"),
            OpenApiParameter("held", bool, description="held for review (only curators see held tools)"),
            OpenApiParameter("enabled", bool),
        ],
    )
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)


class ToolDetail(generics.GenericAPIView):
    no_model_perms = {"GET": "visible_tool: a tool the caller may not discover is a 404"}
    required_scopes = (SCOPE_DISCOVER,)
    serializer_class = ToolDetailSerializer

    @extend_schema(summary="Read a tool: definition, policy, hold status, curation", parameters=[TOOL_ID])
    def get(self, request: Request, tool_id: str) -> Response:
        tool = visible_tool(request, tool_id)
        return Response(ToolDetailSerializer(tool, context={"for_model": for_model(request)}).data)


class ToolRevisionList(generics.ListAPIView):
    no_model_perms = {"GET": "visible_tool and revisions_for_api: only a tool the caller may discover"}
    required_scopes = (SCOPE_DISCOVER,)
    serializer_class = ToolRevisionShownSerializer

    def get_queryset(self) -> QuerySet[ToolRevision]:
        tool = visible_tool(self.request, self.kwargs["tool_id"])
        return revisions_for_api(principal=request_principal(self.request), tool=tool)

    def get_serializer_context(self) -> dict:
        return {**super().get_serializer_context(), "for_model": for_model(self.request)}

    @extend_schema(summary="A tool's upstream definitions, newest first", parameters=[TOOL_ID])
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)


class ToolCuration(generics.GenericAPIView):
    required_scopes = (SCOPE_DISCOVER,)
    required_perms = {"PATCH": ("catalog.change_tool",)}
    serializer_class = CurationSerializer

    @extend_schema(
        summary="Curate a tool: title, purpose, aliases, keywords, example requests, negative queries",
        parameters=[TOOL_ID],
        request=CurationSerializer,
        responses={200: ToolDetailSerializer},
    )
    def patch(self, request: Request, tool_id: str) -> Response:
        tool = visible_tool(request, tool_id)
        if not Server.objects.filter(servers_shaped_by(user=request.user), pk=tool.server_id).exists():
            # Every tenant ranks a shared server's tools: their curation is a superuser's (shared_shaped_by).
            raise PermissionDenied("A shared server's tools are curated by a superuser: every tenant searches them.")
        data = CurationSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = dict(data.validated_data)
        title, purpose = fields.pop("title", None), fields.pop("purpose", None)
        tool_curate(tool=tool, title=title, purpose=purpose, phrases=fields)
        tool = visible_tool(request, tool_id)
        return Response(ToolDetailSerializer(tool, context={"for_model": for_model(request)}).data)


# --- approvals ------------------------------------------------------------------------------------


class Conflict(APIException):
    """A decision the request's state refuses (409), answered in the API's error shape by its exception handler."""

    status_code = status.HTTP_409_CONFLICT
    default_code = "conflict"


# ApprovalError codes -> HTTP status. "forbidden" is a 404: the request is not in the caller's inbox.
APPROVAL_ERROR_STATUS = {
    "unknown": status.HTTP_404_NOT_FOUND,
    "forbidden": status.HTTP_404_NOT_FOUND,
    "self_approval": status.HTTP_403_FORBIDDEN,
    AGENT_DECIDES: status.HTTP_403_FORBIDDEN,
    "reason_required": status.HTTP_400_BAD_REQUEST,
    "not_pending": status.HTTP_409_CONFLICT,
    "expired": status.HTTP_409_CONFLICT,
    "server_not_serving": status.HTTP_409_CONFLICT,  # still pending: decide again once the server is back
}


def inbox_request(request: Request, approval_id: str) -> ApprovalRequest:
    found = approvals_for_api(principal=request_principal(request)).filter(approval_id=approval_id).first()
    if found is None or found.approval_id != approval_id:
        raise NotFound()
    return found


class ApprovalList(generics.ListAPIView):
    no_model_perms = {"GET": "approvals_for_api: the caller's own inbox"}
    required_scopes = (SCOPE_APPROVE,)
    serializer_class = ApprovalSerializer

    def get_queryset(self) -> QuerySet[ApprovalRequest]:
        qs = approvals_for_api(principal=request_principal(self.request))
        wanted = param_choice(self.request.query_params, "status", APPROVAL_STATUS_FILTERS) or "pending"
        return qs if wanted == "all" else qs.filter(status=wanted)

    @extend_schema(
        summary="Your approval inbox (pending requests unless ?status= says otherwise)",
        parameters=[OpenApiParameter("status", str, enum=list(APPROVAL_STATUS_FILTERS), default="pending")],
    )
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)


class ApprovalDetail(generics.GenericAPIView):
    no_model_perms = {"GET": "inbox_request: only a request in the caller's inbox"}
    required_scopes = (SCOPE_APPROVE,)
    serializer_class = ApprovalSerializer

    @extend_schema(summary="Read a request in your inbox")
    def get(self, request: Request, approval_id: str) -> Response:
        return Response(ApprovalSerializer(inbox_request(request, approval_id)).data)


class _Decide(generics.GenericAPIView):
    no_model_perms = {"POST": "inbox_request and the approval service decide who may decide"}
    required_scopes = (SCOPE_APPROVE,)
    serializer_class = ApprovalSerializer
    approve = True
    input_serializer: type = ApprovalDecisionSerializer

    def post(self, request: Request, approval_id: str) -> Response:
        pending = inbox_request(request, approval_id)
        data = self.input_serializer(data=request.data)
        data.is_valid(raise_exception=True)
        try:
            approval_decide(
                request=pending,
                approver=request.user,
                approve=self.approve,
                reason=data.validated_data.get("reason"),
                principal=request_principal(request),
            )
        except ApprovalError as exc:
            code = APPROVAL_ERROR_STATUS.get(exc.code, status.HTTP_409_CONFLICT)
            if code == status.HTTP_404_NOT_FOUND:
                raise NotFound() from None
            if code == status.HTTP_400_BAD_REQUEST:
                raise ValidationError({"reason": [str(exc)]}) from None
            if code == status.HTTP_403_FORBIDDEN:
                raise PermissionDenied(str(exc), code=exc.code) from None
            raise Conflict(str(exc), code=exc.code) from None
        return Response(ApprovalSerializer(inbox_request(request, approval_id)).data)  # its people as shown


class ApprovalApprove(_Decide):
    approve = True

    @extend_schema(summary="Approve a request (not your own)", request=ApprovalDecisionSerializer)
    def post(self, request: Request, approval_id: str) -> Response:
        return super().post(request, approval_id)


class ApprovalDeny(_Decide):
    approve = False
    input_serializer = DenialSerializer

    @extend_schema(summary="Deny a request, with a reason", request=DenialSerializer)
    def post(self, request: Request, approval_id: str) -> Response:
        return super().post(request, approval_id)


class ApprovalDenyMany(generics.GenericAPIView):
    """The admin inbox's "Deny selected": many calls refused with one reason (an agent that looped, a tool under
    incident), each denied and audited as one is."""

    no_model_perms = {"POST": "the caller's inbox and the approval service decide who may decide"}
    required_scopes = (SCOPE_APPROVE,)
    serializer_class = BulkDenialSerializer

    @extend_schema(
        summary="Deny several requests in your inbox, with one reason",
        request=BulkDenialSerializer,
        responses=BulkDenialResultSerializer,
    )
    def post(self, request: Request) -> Response:
        if request_principal(request).agent_id is not None:
            raise PermissionDenied(AGENT_DECIDES_MESSAGE, code=AGENT_DECIDES)  # before any lookup: nothing is told
        data = BulkDenialSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        wanted = list(dict.fromkeys(data.validated_data["approval_ids"]))  # each once, in the order given
        inbox = approvals_for_api(principal=request_principal(request))
        # Exactly the ids given (as inbox_request: a collation that ignores case must not widen the match).
        found = [pk for pk, approval_id in inbox.filter(approval_id__in=wanted).values_list("pk", "approval_id")
                 if approval_id in wanted]  # fmt: skip
        ended = approval_deny_many(
            requests=inbox.filter(pk__in=found),
            approver=request.user,
            reason=data.validated_data["reason"],
            principal=request_principal(request),
        )
        # "forbidden" reads as unknown, as for one denial: a request outside the inbox is not said to exist.
        outcomes = [ended.get(approval_id, "not_found") for approval_id in wanted]
        outcomes = ["not_found" if outcome == "forbidden" else outcome for outcome in outcomes]
        results = [{"approval_id": i, "outcome": outcome} for i, outcome in zip(wanted, outcomes, strict=True)]
        return Response({"denied": outcomes.count("denied"), "results": results})


# --- tokens ---------------------------------------------------------------------------------------


def _check_within_caller(
    principal: Principal, scopes: list[str], expires_at, agent: Agent | None, tenant: Tenant | None
) -> None:
    """A token may mint only tokens that can do no more than itself: its scopes (server limits included), no
    later expiry, its own tenant, and its own agent or one below it (a token for an agent never mints one for
    the person, Z8). A session (a human at the keyboard) may mint any of its own tokens."""
    if principal.token_id is None:
        return
    tenant_id = agent.tenant_id if agent is not None else (tenant.pk if tenant is not None else None)
    if tenant_id != principal.tenant_id:
        raise PermissionDenied("A token can only create tokens for its own tenant.")
    if principal.agent_id is not None and (
        agent is None or principal.agent_id not in {above.pk for above in agent.chain()}
    ):
        raise PermissionDenied("A token for an agent can only create tokens for that agent or agents below it.")
    beyond = scopes_beyond(principal=principal, scopes=scopes)
    if beyond == "scopes":
        raise PermissionDenied("A token cannot create a token with scopes it does not have.", code="insufficient_scope")
    if beyond == "servers":
        raise PermissionDenied("A server-limited token can only create tokens limited to its servers.")
    own = ApiToken.objects.filter(pk=principal.token_id).values_list("expires_at", flat=True).first()
    if own is not None and expires_at > own:
        raise ValidationError({"expires_at": ["cannot be later than the expiry of the token making the request"]})


def _agent_and_tenant(user, agent_name: str, tenant_slug: str) -> tuple[Agent | None, Tenant | None]:
    """The caller's own agent and one of the caller's tenants, by name; one 400 for unknown and foreign alike."""
    agent = tenant = None
    if agent_name.strip():
        agent = Agent.objects.filter(user=user, name=agent_name.strip()).select_related("tenant").first()
        if agent is None:
            raise ValidationError({"agent": ["not one of your agents"]})
    if tenant_slug.strip():
        tenant = user.tenants.filter(slug=tenant_slug.strip()).first()
        if tenant is None:
            raise ValidationError({"tenant": ["not a tenant you belong to"]})
    return agent, tenant


class TokenList(generics.ListAPIView):
    no_model_perms = {"GET": "the caller's own tokens", "POST": "a token within the caller's own scopes"}
    serializer_class = ApiTokenSerializer

    def get_queryset(self) -> QuerySet[ApiToken]:
        return api_tokens_of(principal=request_principal(self.request))

    @extend_schema(summary="Your API tokens")
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(
        summary="Create a token (the raw value is in this response only)",
        request=ApiTokenCreateSerializer,
        responses={201: ApiTokenCreatedSerializer},
    )
    def post(self, request: Request) -> Response:
        data = ApiTokenCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        fields = data.validated_data
        # Unknown scopes are an input error (400) before any comparison with the caller's own (403).
        agent, tenant = _agent_and_tenant(request.user, fields["agent"], fields["tenant"])
        _check_within_caller(
            request_principal(request), scopes_validate(fields["scopes"]), fields["expires_at"], agent, tenant
        )
        # Revoking the minting token revokes this one too (a leaked token's holder may mint one first).
        minter = ApiToken.objects.filter(pk=request_principal(request).token_id).first()
        token, raw = api_token_create(
            user=request.user,
            name=fields["name"],
            scopes=fields["scopes"],
            expires_at=fields["expires_at"],
            agent=agent,
            tenant=tenant,
            # Whoever holds the minting token holds this one: a token a superuser issued for someone mints tokens
            # that are the superuser's too, who may then not decide the requests they raise (T5), as for the first.
            created_by=minter.created_by if minter is not None and minter.created_by_id else request.user,
            minted_by=minter,
        )
        body = {**ApiTokenSerializer(token).data, "token": raw}
        return Response(body, status=status.HTTP_201_CREATED, headers={"Cache-Control": "no-store"})


def own_token(request: Request, pk: int) -> ApiToken:
    token = api_tokens_of(principal=request_principal(request)).filter(pk=pk).first()
    if token is None:
        raise NotFound()
    return token


class TokenDetail(generics.GenericAPIView):
    no_model_perms = {"GET": "own_token: only the caller's own tokens"}
    serializer_class = ApiTokenSerializer

    @extend_schema(summary="Read one of your tokens")
    def get(self, request: Request, pk: int) -> Response:
        return Response(ApiTokenSerializer(own_token(request, pk)).data)


class TokenRevoke(generics.GenericAPIView):
    no_model_perms = {"POST": "own_token: only the caller's own tokens"}
    serializer_class = ApiTokenSerializer

    @extend_schema(summary="Revoke one of your tokens (it fails from the next call)", request=None)
    def post(self, request: Request, pk: int) -> Response:
        token = api_token_revoke(token=own_token(request, pk), actor=request.user)
        return Response(ApiTokenSerializer(token).data)


# --- audit ----------------------------------------------------------------------------------------

AUDIT_PERMS = {"GET": ("governance.view_auditevent",)}


class AuditList(generics.ListAPIView):
    require_staff = True
    required_perms = AUDIT_PERMS
    serializer_class = AuditEventSerializer

    def get_queryset(self) -> QuerySet[AuditEvent]:
        visible = audit_events_visible_to(principal=request_principal(self.request))
        return audit_filter(visible.order_by("-created_at", "-id"), self.request.query_params)

    @extend_schema(
        summary="The audit trail, newest first",
        parameters=[
            OpenApiParameter("since", OpenApiTypes.DATETIME, description="from this time (inclusive)"),
            OpenApiParameter("until", OpenApiTypes.DATETIME, description="before this time"),
            OpenApiParameter("user", str, description="username of the human subject"),
            OpenApiParameter("event_type", str, description="e.g. execution, discovery, approval.approved"),
            OpenApiParameter("outcome", str, description="success, denied, error, pending, unknown"),
            OpenApiParameter("tool", str, description="server::name"),
        ],
    )
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)


class AuditDetail(generics.RetrieveAPIView):
    require_staff = True
    required_perms = AUDIT_PERMS
    serializer_class = AuditEventSerializer

    def get_queryset(self) -> QuerySet[AuditEvent]:
        return audit_events_visible_to(principal=request_principal(self.request))
