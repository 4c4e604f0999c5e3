"""Servers (list, register, edit, archive, sync) and sync runs, for operators with catalog model permissions."""

import uuid

from django.db import transaction
from django.db.models import Count, Q, QuerySet
from django.shortcuts import get_object_or_404
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import generics, status
from rest_framework.exceptions import PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response

from catalog.choices import ServerStatus, SyncStatus
from catalog.models import Server, SyncRun
from catalog.scope import server_claim, server_fields_locked, server_scope_q, servers_fields_locked, tool_count_q
from catalog.services.servers import server_archive, server_create, server_update
from catalog.tasks import sync_server_asked

from .params import param_choice
from .serializers import (
    AgentServerSerializer,
    AgentSyncRunSerializer,
    ServerCreateSerializer,
    ServerSerializer,
    ServerWriteSerializer,
    SyncQueuedSerializer,
    SyncRunSerializer,
)

VIEW_SERVER = ("catalog.view_server",)
CHANGE_SERVER = ("catalog.view_server", "catalog.change_server")


def _token_servers(request: Request) -> frozenset[str] | None:
    # request.auth is governance's Principal for a token (None for a session); read duck-typed, as catalog
    # must not import governance.
    return getattr(request.auth, "server_slugs", None)


def server_serializer(request: Request) -> type[ServerSerializer]:
    """How the caller reads a server: a token acting for an agent (``agent_id`` on governance's Principal, read
    duck-typed) or a person who may not change servers (a curator, as on their admin pages) without its launch
    details (``AgentServerSerializer``), an operator whole."""
    if getattr(request.auth, "agent_id", None) is not None or not request.user.has_perm("catalog.change_server"):
        return AgentServerSerializer
    return ServerSerializer


def sync_run_serializer(request: Request) -> type[SyncRunSerializer]:
    """How the caller reads a sync run: a token acting for an agent without its error (``AgentSyncRunSerializer``)."""
    return AgentSyncRunSerializer if getattr(request.auth, "agent_id", None) is not None else SyncRunSerializer


def servers_for_request(request: Request) -> QuerySet[Server]:
    """The servers the caller may see (``server_scope_q``: shared ones and their tenant's, Z12), narrowed to the
    token's server:<slug> scopes when it has any. Another tenant's server is answered like an unknown slug. Each counts
    its live tools the caller may count (``tool_count_q``)."""
    qs = Server.objects.filter(server_scope_q(request))
    qs = qs.annotate(tool_count=Count("tools", filter=Q(tools__removed_at__isnull=True) & tool_count_q(request)))
    slugs = _token_servers(request)
    if slugs is not None:
        qs = qs.filter(slug__in=sorted(slugs))
    return qs.order_by("slug")


def _refuse_locked(request: Request, server: Server | None, fields: dict) -> None:
    """403 when the request sets a field the caller may not (``server_fields_locked``) to another value."""
    locked = server_fields_locked(request, server)
    changed = [name for name in fields if name in locked and fields[name] != getattr(server or Server(), name)]
    if changed:
        raise PermissionDenied(
            f"Only a superuser sets {', '.join(sorted(changed))} here: environment variables and commands belong to "
            "the whole install, and a shared server to every tenant.",
            code="permission_denied",
        )


def _server(request: Request, slug: str) -> Server:
    return get_object_or_404(servers_for_request(request), slug=slug)


def _server_data(request: Request, slug: str) -> dict:
    return server_serializer(request)(_server(request, slug), context={"request": request}).data


class ServerList(generics.ListAPIView):
    required_perms = {"GET": VIEW_SERVER, "POST": ("catalog.view_server", "catalog.add_server")}
    serializer_class = ServerSerializer

    def get_serializer_class(self) -> type[ServerSerializer]:
        return server_serializer(self.request)

    def get_serializer(self, *args, **kwargs) -> ServerSerializer:
        if kwargs.get("many") and args:  # a page: every row's locked fields at once (three queries a row before)
            servers = list(args[0])
            kwargs["context"] = {
                **self.get_serializer_context(),
                "fields_locked": servers_fields_locked(self.request, servers),
            }
            args = (servers, *args[1:])
        return super().get_serializer(*args, **kwargs)

    def get_queryset(self) -> QuerySet[Server]:
        qs = servers_for_request(self.request)
        status_filter = param_choice(self.request.query_params, "status", ServerStatus.values)
        return qs.filter(status=status_filter) if status_filter else qs

    @extend_schema(
        summary="List servers",
        parameters=[OpenApiParameter("status", str, description="active, degraded, unavailable, disabled, archived")],
    )
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)

    @extend_schema(summary="Register a server", request=ServerCreateSerializer, responses={201: ServerSerializer})
    def post(self, request: Request) -> Response:
        data = ServerCreateSerializer(data=request.data)
        data.is_valid(raise_exception=True)
        _refuse_locked(request, None, data.validated_data)
        with transaction.atomic():
            server = server_create(**data.validated_data)
            server_claim(request, server)  # a tenant's caller registers their tenant's server, never a shared one
        return Response(_server_data(request, server.slug), status=status.HTTP_201_CREATED)


class ServerDetail(generics.GenericAPIView):
    required_perms = {"GET": VIEW_SERVER, "PATCH": CHANGE_SERVER}
    serializer_class = ServerSerializer

    @extend_schema(summary="Read a server")
    def get(self, request: Request, slug: str) -> Response:
        return Response(_server_data(request, slug))

    @extend_schema(
        summary="Edit a server (slug and status are not editable)",
        request=ServerWriteSerializer(partial=True),
        responses={200: ServerSerializer},
    )
    def patch(self, request: Request, slug: str) -> Response:
        server = _server(request, slug)
        data = ServerWriteSerializer(data=request.data, partial=True)
        data.is_valid(raise_exception=True)
        _refuse_locked(request, server, data.validated_data)
        server_update(server=server, **data.validated_data)
        return Response(_server_data(request, slug))


class ServerArchive(generics.GenericAPIView):
    required_perms = {"POST": CHANGE_SERVER}
    serializer_class = ServerSerializer

    @extend_schema(summary="Archive a server: its tools disappear everywhere, syncs stop", request=None)
    def post(self, request: Request, slug: str) -> Response:
        server = _server(request, slug)
        _refuse_locked(request, server, {"status": ServerStatus.ARCHIVED})
        server_archive(server=server)
        return Response(_server_data(request, slug))


class ServerSync(generics.GenericAPIView):
    required_perms = {"POST": CHANGE_SERVER}
    serializer_class = SyncQueuedSerializer

    @extend_schema(summary="Queue a sync of the server", request=None, responses={202: SyncQueuedSerializer})
    def post(self, request: Request, slug: str) -> Response:
        server = _server(request, slug)
        # A unique trigger names the run, so the caller can also find it by source.
        trigger = f"api:{uuid.uuid4().hex}"
        # Theirs: in their home's recent actions. With a worker the run is queued now, and the worker carries it on
        # (mend3); with in-process tasks it has run by the next line, failed with its reason if Scout itself failed
        # it (mend2).
        run = sync_server_asked(server, trigger, request.user.pk)
        run = run or SyncRun.objects.filter(server=server, source=trigger).first()
        body = {
            "trigger": trigger,
            "sync_run": sync_run_serializer(request)(run, context={"request": request}).data if run else None,
        }
        return Response(body, status=status.HTTP_202_ACCEPTED)


def _runs_for_request(request: Request) -> QuerySet[SyncRun]:
    """Sync runs of the servers the caller may see (file imports' runs have no server: not listed here)."""
    return SyncRun.objects.filter(server__in=Server.objects.filter(server_scope_q(request))).select_related("server")


class SyncRunList(generics.ListAPIView):
    required_perms = {"GET": ("catalog.view_syncrun",)}
    serializer_class = SyncRunSerializer

    def get_serializer_class(self) -> type[SyncRunSerializer]:
        return sync_run_serializer(self.request)

    @extend_schema(
        summary="List sync runs, newest first",
        parameters=[
            OpenApiParameter("server", str, description="server slug"),
            OpenApiParameter("status", str, description="queued, running, success, partial, failed, skipped"),
            OpenApiParameter("source", str, description="e.g. the trigger a sync request returned"),
        ],
    )
    def get(self, request: Request, *args, **kwargs) -> Response:
        return super().get(request, *args, **kwargs)

    def get_queryset(self) -> QuerySet[SyncRun]:
        qs = _runs_for_request(self.request).order_by("-started_at", "-id")
        slugs = _token_servers(self.request)
        if slugs is not None:
            qs = qs.filter(server__slug__in=sorted(slugs))
        params = self.request.query_params
        if params.get("server"):
            qs = qs.filter(server__slug=params["server"])
        if status_filter := param_choice(params, "status", SyncStatus.values):
            qs = qs.filter(status=status_filter)
        if params.get("source"):
            qs = qs.filter(source=params["source"])
        return qs


class SyncRunDetail(generics.RetrieveAPIView):
    required_perms = {"GET": ("catalog.view_syncrun",)}
    serializer_class = SyncRunSerializer

    def get_serializer_class(self) -> type[SyncRunSerializer]:
        return sync_run_serializer(self.request)

    def get_queryset(self) -> QuerySet[SyncRun]:
        qs = _runs_for_request(self.request)
        slugs = _token_servers(self.request)
        return qs.filter(server__slug__in=sorted(slugs)) if slugs is not None else qs
