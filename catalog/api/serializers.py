"""Catalog serializers: servers, sync runs, tool revisions."""

from rest_framework import serializers

from catalog.choices import Transport
from catalog.models import Server, SyncRun, ToolRevision
from catalog.scope import server_fields_locked
from catalog.services.servers import EDITABLE_FIELDS
from catalog.urltext import url_paths_cut


class ServerSerializer(serializers.ModelSerializer):
    tool_count = serializers.IntegerField(read_only=True, help_text="Tools the server still lists")

    def to_representation(self, instance: Server) -> dict:
        data = super().to_representation(instance)
        request = self.context.get("request")
        # A list's page reads every row's locked fields at once (ServerList); a single server asks for its own.
        page_locked = self.context.get("fields_locked")
        if page_locked is not None and instance.pk in page_locked:
            locked = page_locked[instance.pk]
        else:
            locked = server_fields_locked(request, instance) if request is not None else frozenset()
        if "url" in locked:
            # A connection the caller may not change (a shared server, to a tenant's operator) is not theirs to read:
            # its URL is every tenant's credential, a superuser's (redteam40).
            for name in LAUNCH_FIELDS:
                data.pop(name, None)
        return data

    class Meta:
        model = Server
        fields = (
            "slug",
            *EDITABLE_FIELDS,
            "status",
            "tool_count",
            "last_synced_at",
            "last_error",
            "created_at",
            "updated_at",
        )
        read_only_fields = fields


# How an operator starts or reaches a server, and what went wrong doing it: a hosted server's URL often carries its
# secret in the path, arguments a key, and the variable names and last error say where the secrets are and what the
# network looks like. The operator's own; never read through a token acting for an agent (redteam37, T1/T14), nor by a
# person who may not change servers (a curator, redteam40).
LAUNCH_FIELDS = ("command", "args", "env_vars", "url", "header_env", "last_error")


class AgentServerSerializer(ServerSerializer):
    """A server as a token acting for an agent, or a person who does not run servers, reads it: what it is and whether
    it serves, not how it is started."""

    class Meta(ServerSerializer.Meta):
        fields = tuple(name for name in ServerSerializer.Meta.fields if name not in LAUNCH_FIELDS)
        read_only_fields = fields


class ServerWriteSerializer(serializers.Serializer):
    """Fields an operator writes. Model rules (a stdio server needs a command, ...) are checked by the service."""

    name = serializers.CharField(max_length=200)
    description = serializers.CharField(required=False, allow_blank=True)
    category = serializers.CharField(max_length=100, required=False, allow_blank=True)
    environment = serializers.CharField(max_length=50, required=False)
    transport = serializers.ChoiceField(choices=Transport.choices, required=False)
    command = serializers.CharField(max_length=500, required=False, allow_blank=True)
    args = serializers.ListField(child=serializers.CharField(allow_blank=True), required=False)
    env_vars = serializers.ListField(child=serializers.CharField(), required=False)
    url = serializers.URLField(max_length=500, required=False, allow_blank=True)
    header_env = serializers.DictField(child=serializers.CharField(), required=False)


class ServerCreateSerializer(ServerWriteSerializer):
    slug = serializers.CharField(
        max_length=200,
        help_text="Namespace in tool ids (slug::tool): letters, digits, - and _; fixed once created",
    )


class SyncRunSerializer(serializers.ModelSerializer):
    server = serializers.SlugRelatedField(slug_field="slug", read_only=True)
    duration_seconds = serializers.FloatField(read_only=True, allow_null=True)
    url = serializers.HyperlinkedIdentityField(view_name="syncrun-detail", help_text="Where to follow the run")

    def to_representation(self, instance: SyncRun) -> dict:
        data = super().to_representation(instance)
        request = self.context.get("request")
        if request is not None and data.get("error") and instance.server_id and self._error_cut(request, instance):
            # Its error repeats the server's URL, path and all: read cut to the origin by who may not read that
            # connection (a shared server's, to a tenant's operator), as the server itself (redteam42).
            data["error"] = url_paths_cut(data["error"])
        return data

    def _error_cut(self, request, run: SyncRun) -> bool:
        asked = self.context.setdefault("errors_cut", {})  # one answer per server for a whole page of runs
        if run.server_id not in asked:
            asked[run.server_id] = not request.user.has_perm("catalog.change_server") or "url" in server_fields_locked(
                request, run.server
            )
        return asked[run.server_id]

    class Meta:
        model = SyncRun
        fields = (
            "id",
            "url",
            "server",
            "kind",
            "source",
            "status",
            "started_at",
            "finished_at",
            "duration_seconds",
            "added",
            "changed",
            "unchanged",
            "removed",
            "rejected",
            "error",
            "rejections",
        )
        read_only_fields = fields


class AgentSyncRunSerializer(SyncRunSerializer):
    """A sync run as a token acting for an agent reads it: its error names the server's URL (a hosted server's
    secret may be in its path) and hosts or paths of the operator's (``LAUNCH_FIELDS``, redteam37)."""

    class Meta(SyncRunSerializer.Meta):
        fields = tuple(name for name in SyncRunSerializer.Meta.fields if name != "error")
        read_only_fields = fields


class SyncQueuedSerializer(serializers.Serializer):
    trigger = serializers.CharField(help_text="The run's source; filter /sync-runs/?source= with it")
    sync_run = SyncRunSerializer(
        allow_null=True, help_text="The run: queued for a worker (follow it at its url), or already ended in-process"
    )


class ToolRevisionSerializer(serializers.ModelSerializer):
    # Named: DRF maps an OrderedJSONField (a TextField underneath) to a CharField, which would give the dict's repr.
    definition = serializers.JSONField(read_only=True)

    class Meta:
        model = ToolRevision
        fields = ("definition_hash", "definition", "created_at", "sync_run")
        read_only_fields = fields
