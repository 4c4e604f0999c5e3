"""Servers: health at a glance, the last runs, and "Sync now"."""

import json
from collections.abc import Sequence
from typing import Any

from django import forms
from django.contrib import admin, messages
from django.core.exceptions import NON_FIELD_ERRORS, PermissionDenied, ValidationError
from django.db import models, transaction
from django.db.models import OuterRef, QuerySet, Subquery
from django.forms.models import BaseInlineFormSet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404, render
from django.template.defaultfilters import pluralize
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html
from django.utils.http import urlencode
from django.utils.text import Truncator
from django.views.decorators.http import require_POST

from catalog import breaker
from catalog.advice import connection_test_next, sync_failed_next
from catalog.choices import (
    OPERATOR_STOPPED_STATUSES,
    SERVER_STATUS_HIDES_TOOLS,
    TOOLS_HIDDEN_SHORT,
    ServerStatus,
    SyncStatus,
    Transport,
)
from catalog.models import (
    FORM_TRANSPORT_FIELDS,
    Server,
    SyncRun,
    field_is_empty,
    transport_field_refusal,
    validate_server_slug,
)
from catalog.openapi import BINDING_KEY
from catalog.scope import server_fields_locked
from catalog.services.openapi_documents import server_openapi_document_get, server_openapi_document_set
from catalog.services.servers import server_archive, server_restore, server_upstream_hosts_check
from catalog.services.sync import server_openapi_preview
from catalog.upstream import UpstreamError, list_tools
from catalog.urltext import url_paths_cut

from .display import (
    admin_link,
    badge,
    breakable_column,
    breakable_id,
    compact_time,
    run_status_badge,
    run_tool_counts,
    text_block,
)
from .filters import held_q, tool_count_annotations
from .lookups import StrictLookupsMixin
from .readonly import ReadOnlyMixin
from .titles import TitledAdminMixin

RECENT_RUNS_SHOWN = 10
# Under a failed (or not run) last sync of a server no sync ever succeeded for, where its last good sync's time goes.
NEVER_SUCCEEDED = "never synced successfully"
# Breaker state -> (a status whose colour fits, label, what it means for calls: "flowing" alone read as jargon).
BREAKER_BADGES = {
    breaker.CLOSED: (ServerStatus.ACTIVE, "flowing", "Calls reach the server."),
    breaker.HALF_OPEN: (ServerStatus.DEGRADED, "probing", "After failed calls, one trial call at a time reaches it."),
    breaker.OPEN: (
        ServerStatus.UNAVAILABLE,
        "breaker open",
        "Calls fail at once without reaching the server, after several failed in a row; it is tried again shortly.",
    ),
}
# How a server is started or reached: a hosted server's URL often carries its secret in the path, an argument a key,
# and the variable names say where the secrets are. Shown to who may change servers (operators), never to a reader of
# the server list who does not run servers (a curator), whose page also shows the last error's URLs cut to their
# origin (redteam40, T14).
CONNECTION_FIELDS = frozenset(
    {"command", "args", "env_vars", "url", "header_env", "base_url", "openapi_url", "openapi_upload"}
    | {"openapi_document", "openapi_credentials"}
)
CONNECTION_TEST_FIELDS = (
    *("slug", "name", "transport", "command", "args", "env_vars", "url", "header_env"),
    *("base_url", "openapi_url", "openapi_credentials"),  # and the form's own document fields (upload, text)
)


class RecentRunsFormSet(BaseInlineFormSet):
    """Only the latest runs; evaluated once, since the formset indexes its queryset row by row."""

    def get_queryset(self) -> QuerySet:
        if not hasattr(self, "_recent"):
            self._recent = super().get_queryset()[:RECENT_RUNS_SHOWN]
            len(self._recent)  # fills the result cache: later indexing reads it instead of querying
        return self._recent


class RecentSyncRunInline(ReadOnlyMixin, admin.TabularInline):
    model = SyncRun
    formset = RecentRunsFormSet
    verbose_name_plural = f"Last {RECENT_RUNS_SHOWN} sync runs"
    # What each run did to tools in one column ("2 added · 9 unchanged"): five count columns cut the table at 800 px.
    fields = ("run_link", "kind", "status_badge", "source_column", "tool_counts")
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False
    # Without the run's raw name ("sync mail 2026-12-03 08:39:24 success") over each row: the row says all of it.
    template = "admin/edit_inline/scout_tabular.html"

    @admin.display(description="started")
    def run_link(self, run: SyncRun) -> str:
        return admin_link(run, compact_time(run.started_at))

    @admin.display(description="source")
    def source_column(self, run: SyncRun) -> str:
        return breakable_id(run.source, text=True) if run.source else "—"  # a path of an imported file breaks

    @admin.display(description="tools")
    def tool_counts(self, run: SyncRun) -> str:
        return run_tool_counts(run) or "—"

    @admin.display(description="status")
    def status_badge(self, run: SyncRun) -> str:
        return run_status_badge(run.status)


# Each transport's own fields: the form shows only the chosen transport's (server_form.js); Server.clean refuses the
# others' (the admin, REST and the services alike), and the form the OpenAPI document's with the same words.
TRANSPORT_FIELDS = FORM_TRANSPORT_FIELDS
FORM_ONLY_FIELDS = ("openapi_upload", "openapi_document")
# A JSON box left empty means none (the script empties the boxes of the transports not chosen).
JSON_EMPTY = {"args": list, "env_vars": list, "header_env": dict, "openapi_credentials": list}


def connection_hidden(request: HttpRequest, server: Server | None) -> frozenset[str]:
    """The ``CONNECTION_FIELDS`` of ``server`` the reader may not read: all of them for who may not change servers;
    the model's for a server whose connection they may not change (a shared one, to a tenant's operator: its URL is
    every tenant's credential, a superuser's; those fields are read-only to them, so the form keeps its own)."""
    if not request.user.has_perm("catalog.change_server"):
        return CONNECTION_FIELDS
    if server is not None and server.pk is not None and "url" in server_fields_locked(request, server):
        return CONNECTION_FIELDS - set(FORM_ONLY_FIELDS)
    return frozenset()


def tool_count_links(server: Server) -> str:
    """“N live, M held”: each a link to the tool list showing those tools (counted by ``tool_count_annotations``
    where the queryset has them)."""
    live = getattr(server, "live_tool_count", None)
    held = getattr(server, "held_tool_count", None)
    if live is None or held is None:
        tools = server.tools.live()
        live = tools.filter(enabled=True).exclude(held_q()).count()
        held = tools.filter(held_q()).count()
    base = reverse("admin:catalog_tool_changelist") + "?"
    live_link = format_html(
        '<a href="{}">{} live</a>', base + urlencode({"server": server.slug, "status": "live"}), live
    )
    if live and server.status != ServerStatus.ACTIVE:  # only an Active server's tools reach clients
        live_link = format_html("{} (served to no client while {})", live_link,
                                server.get_status_display().lower())  # fmt: skip
    if not held:
        return live_link
    held_url = base + urlencode({"server": server.slug, "status": "held"})
    return format_html('{}, <a class="scout-held-text" href="{}"><strong>{} held</strong></a>', live_link,
                       held_url, held)  # fmt: skip


class ServerForm(forms.ModelForm):
    """The server form, plus the OpenAPI document: uploaded or pasted, stored beside the server on save.

    Only the chosen transport's fields apply: a value in another transport's field is refused with its name, so
    the form works the same without the script that hides them."""

    openapi_upload = forms.FileField(
        required=False,
        label="Upload OpenAPI document",
        help_text="A JSON or YAML file; replaces the document text below.",
    )
    openapi_document = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 12, "cols": 100}),
        label="OpenAPI document",
        help_text="The document itself (JSON or YAML), used instead of a document URL.",
    )

    class Meta:
        model = Server
        fields = ("transport",)  # the admin passes the fieldsets' fields
        labels = {
            "slug": "Slug",
            "transport": "Transport",
            "command": "Command",
            "args": "Arguments",
            "env_vars": "Environment variables passed to the process",
            "url": "URL",
            "header_env": "Headers with credentials: environment variable names",
            "base_url": "Base URL",
            "openapi_url": "OpenAPI document URL",
            "openapi_credentials": "Credentials: environment variable names",
            "status": "Set status",
        }
        # A plain box: the admin's URL widget put "Currently: <link> Change:" above it, on a new server too once the
        # form came back with an error.
        widgets = {name: forms.URLInput(attrs={"class": "vURLField"}) for name in ("url", "base_url", "openapi_url")}
        # Room for a whole path: Django's 20em text box cut the demo's own command to "/work/.../.venv/bin/mcp-serv".
        widgets["command"] = forms.TextInput(attrs={"class": "vTextField scout-long-text"})
        help_texts = {
            "slug": "The server's name in tool ids (slug::tool): letters, digits, - and _, e.g. github-prod. "
            "Fixed once saved.",
            "transport": "How Scout reaches the server; only its own fields below apply.",
            "command": "The executable to start, e.g. uvx or /usr/local/bin/mcp-server-time.",
            "args": 'A JSON array of strings, e.g. ["mcp-server-time", "--local-timezone", "UTC"].',
            "env_vars": "A JSON array of the names of variables passed to the process from Scout's environment, e.g. "
            '["GITHUB_TOKEN"]. Values are never stored.',
            "url": "The Streamable HTTP endpoint, e.g. https://mcp.example.com/mcp.",
            "header_env": "A JSON object: header name → the environment variable holding its value, e.g. "
            '{"Authorization": "EXAMPLE_TOKEN"} (the variable holds "Bearer …"). Values are never stored.',
            "base_url": "Where requests go, e.g. https://api.example.com/v1 (the document's servers are ignored).",
            "openapi_url": "Where to fetch the OpenAPI 3.0/3.1 document (JSON or YAML).",
            "openapi_credentials": 'A JSON array, e.g. [{"type": "bearer", "env": "PETS_TOKEN"}] (see the README '
            "for api_key and basic). Values are never stored.",
            "status": "Only an Active server's tools reach clients. Disabled stops syncs until you set it back to "
            "Active; a sync sets Degraded or Unavailable by itself.",
        }

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if self.instance.pk and "openapi_document" in self.fields:
            self.fields["openapi_document"].initial = server_openapi_document_get(server=self.instance)
        if "slug" in self.fields:  # a new server (the slug is read-only once saved)
            self.fields["slug"].validators.append(validate_server_slug)
        if "transport" in self.fields:  # read by server_form.js, which hides the other transports' rows
            self.fields["transport"].widget.attrs["data-transport-fields"] = json.dumps(TRANSPORT_FIELDS)

    def _update_errors(self, errors: ValidationError) -> None:
        # The model's rules may name a field this admin sees read-only (not in the form, e.g. a stdio server's command
        # for a tenant's operator): its message goes above the form instead of failing the page.
        if hasattr(errors, "error_dict"):
            placed: dict[str, list] = {}
            for name, messages in errors.error_dict.items():
                if name in self.fields and name in self.errors:
                    continue  # the form refused the value (e.g. its host): not "a URL is needed" on top
                placed.setdefault(name if name in self.fields else NON_FIELD_ERRORS, []).extend(messages)
            errors = ValidationError(placed)
        super()._update_errors(errors)

    def clean(self) -> dict[str, Any]:
        cleaned = super().clean()
        for name, empty in JSON_EMPTY.items():
            if name in cleaned and cleaned[name] is None:
                cleaned[name] = empty()
        upload = cleaned.get("openapi_upload")
        if upload is not None:
            try:
                cleaned["openapi_document"] = upload.read().decode("utf-8-sig")
            except UnicodeDecodeError:
                self.add_error("openapi_upload", "The document must be UTF-8 text.")
        # A field the admin shows read-only is not in cleaned: the stored value stands.
        transport = cleaned.get("transport", self.instance.transport)
        try:  # only the URLs this form sets: a read-only one is the stored value, which stands
            server_upstream_hosts_check(
                transport=transport,
                values=cleaned,
                changed=[name for name in self.changed_data if name in cleaned] if self.instance.pk else None,
            )
        except ValidationError as error:
            self.add_error(None, error)
        if transport in TRANSPORT_FIELDS:
            self._refuse_other_transports_fields(cleaned, Transport(transport))
        if transport == Transport.OPENAPI and "openapi_document" in self.fields:  # else the stored document stands
            openapi_url = cleaned.get("openapi_url", self.instance.openapi_url)
            if bool(openapi_url) == bool((cleaned.get("openapi_document") or "").strip()):
                self.add_error("openapi_url", "Give either the document's URL or the document itself.")
        return cleaned

    def _refuse_other_transports_fields(self, cleaned: dict[str, Any], transport: Transport) -> None:
        # The model's fields are refused by Server.clean; the document's fields are the form's own.
        if transport == Transport.OPENAPI:
            return
        for name in FORM_ONLY_FIELDS:
            if name in self.fields and not field_is_empty(cleaned.get(name)):
                self.add_error(name, transport_field_refusal(name, transport))


@admin.register(Server)
class ServerAdmin(TitledAdminMixin, StrictLookupsMixin, admin.ModelAdmin[Server]):
    form = ServerForm
    filters_below = True  # at 768-1024 px, under the rows: its slug, health and last sync first (admin.css)
    list_display = (
        "slug_column",
        "name_column",
        "status_badge",
        "breaker_badge",
        "transport",
        "tool_count",
        "last_run",
    )  # the environment is a filter; fewer columns keep the last one in view beside both sidebars at 1280 px
    list_filter = ("status", "transport", "environment")
    search_fields = ("slug", "name", "description", "category")
    # No query-string lookup on a connection field or the last error: ``?url__startswith=https://mcp.example/s/a``
    # would spell a URL's secret out one letter at a time in the row count to a reader who does not see it.
    hidden_lookups = (*sorted(CONNECTION_FIELDS), "last_error")
    ordering = ("slug",)
    actions = ("sync_now", "archive", "restore")
    inlines = (RecentSyncRunInline,)
    change_form_template = "admin/catalog/server/change_form.html"
    readonly_fields = (
        *("health", "tool_count", "last_synced_at", "last_error_display", "last_error_origins", "created_at"),
        "updated_at",
    )
    fieldsets = (
        (None, {"fields": ("slug", "name", "description", "category", "environment", "alternatives")}),
        ("Connection", {"fields": ("transport", "command", "args", "env_vars", "url", "header_env")}),
        (
            "OpenAPI service",
            {
                "fields": ("base_url", "openapi_url", "openapi_upload", "openapi_document", "openapi_credentials"),
                "description": "For transport OpenAPI: the document (a URL, a file or pasted text), where requests "
                "go, and credentials by environment variable name. Hosts must be in SCOUT_UPSTREAM_ALLOWED_HOSTS.",
            },
        ),
        ("Health", {"fields": ("health", "status", "tool_count", "last_synced_at", "last_error_display")}),
        ("Record", {"fields": ("created_at", "updated_at"), "classes": ("collapse",)}),
    )

    filter_horizontal = ("alternatives",)
    prepopulated_fields = {"slug": ("name",)}  # "Clock Two" gives "clock-two" as you type (a new server only)

    class Media:
        js = ("scout/server_form.js",)

    list_title = "Servers — the upstream MCP servers and REST services whose tools Scout serves"

    def object_title(self, request: HttpRequest, obj: Server) -> str:
        return f"Server {obj.slug}"

    def render_change_form(self, request: HttpRequest, context: dict, *args: Any, obj: Server | None = None,
                           **kwargs: Any) -> HttpResponse:  # fmt: skip
        if obj is not None and obj.last_error:  # what to do about the failed sync the page starts with
            context["sync_failed_next"] = sync_failed_next(obj.last_error)
            hidden = connection_hidden(request, obj)
            context["last_error_shown"] = url_paths_cut(obj.last_error) if hidden else obj.last_error
        if obj is not None and obj.status in OPERATOR_STOPPED_STATUSES:
            # Said at the top: the Health section, far below the connection fields, was where an operator learned it.
            context["stopped_note"] = SERVER_STATUS_HIDES_TOOLS[obj.status]
            context["stopped_badge"] = badge(obj.status, obj.get_status_display())
            # The restore action leaves a server whose status is locked for this caller as it is (_status_settable).
            context["may_restore"] = "status" not in server_fields_locked(request, obj)
        return super().render_change_form(request, context, *args, obj=obj, **kwargs)

    def get_readonly_fields(self, request: HttpRequest, obj: Server | None = None) -> Sequence[str]:
        # The slug is fixed once saved: every tool id, grant scope and audit row names it.
        return (*self.readonly_fields, "slug") if obj is not None else self.readonly_fields

    def get_prepopulated_fields(self, request: HttpRequest, obj: Server | None = None) -> dict[str, Sequence[str]]:
        return {} if obj is not None else self.prepopulated_fields

    def get_inline_instances(self, request: HttpRequest, obj: Server | None = None) -> list:
        inlines = super().get_inline_instances(request, obj)
        if obj is None:  # a new server has no sync runs: no empty table on the add form
            return [inline for inline in inlines if not isinstance(inline, RecentSyncRunInline)]
        return inlines

    def get_fieldsets(self, request: HttpRequest, obj: Server | None = None) -> Any:
        fieldsets = super().get_fieldsets(request, obj)
        if obj is None:  # a new server has no health yet: it is synced once saved ("Never synced" until then)
            return [fieldset for fieldset in fieldsets if fieldset[0] not in ("Health", "Record")]
        hidden = connection_hidden(request, obj)
        if not hidden:
            return fieldsets
        shown = []
        for name, options in fieldsets:
            fields = [field for field in options["fields"] if field not in hidden]
            fields = ["last_error_origins" if field == "last_error_display" else field for field in fields]
            if fields:
                shown.append((name, {**options, "fields": fields}))
        return shown

    def response_add(self, request: HttpRequest, obj: Server, post_url_continue: str | None = None) -> HttpResponse:
        if obj.transport != Transport.IMPORTED:
            # Once the new row is committed (a worker must find it), still within this request: the message is
            # added then, so it can say how an in-process sync ended.
            transaction.on_commit(lambda: self._sync_and_say(request, obj, first=True))
        return super().response_add(request, obj, post_url_continue)

    def _sync_and_say(self, request: HttpRequest, server: Server, *, first: bool = False) -> None:
        """Sync ``server`` and say what happened: queued for a worker, or, where tasks run in-process
        (CELERY_TASK_ALWAYS_EAGER, the embedded default and the demo), how the sync that has run by now ended."""
        queued, _ = self._queue_sync(request, [server])
        if not queued:
            return  # _queue_sync said why
        from catalog.tasks import sync_server

        # In-process, it has run by now; else its run is queued for a worker (None: Scout failed before it had one).
        run = SyncRun.objects.filter(server=server).first() if sync_server.app.conf.task_always_eager else queued[0]
        if run is None or run.status == SyncStatus.QUEUED:
            level, outcome = messages.INFO, self._sync_queued_message(request, server, run, first=first)
        else:
            level, outcome = self._sync_outcome(request, server, run, first=first)
        if first:
            outcome = format_html("{} {}", outcome, self.access_note(server))
        self.message_user(request, outcome, level)

    def _sync_outcome(self, request: HttpRequest, server: Server, run: SyncRun, *, first: bool) -> tuple[int, str]:
        """How the sync went, linking where its details and what to do are: its run (for who may read runs), else
        the server's page (which shows the last error and what to do)."""
        if request.user.has_perm("catalog.view_syncrun"):
            details = format_html('<a href="{}">its run</a>', reverse("admin:catalog_syncrun_change", args=[run.pk]))
        else:
            details = format_html('<a href="{}">its page</a>', reverse("admin:catalog_server_change", args=[server.pk]))
        sync, slug = "First sync" if first else "Sync", server.slug
        if run.status == SyncStatus.SUCCESS and first:
            added = f"{run.added} tool{pluralize(run.added)} added"
            return messages.SUCCESS, format_html("First sync of {} succeeded: {}.", slug, added)
        if run.status == SyncStatus.SUCCESS:
            # Its tools as the server list counts them (a changed definition may be held for review), each linked;
            # counted now (run.server), not as the admin's queryset counted them before the sync.
            # The counts that are not zero, as the run list says them: "0 added, 0 changed, 1 removed" read as if
            # something had been added, and left out the tools that stayed as they were (opsux4).
            text = "Sync of {} succeeded: {}; its tools now: {}."
            tools = tool_count_links(run.server)
            return messages.SUCCESS, format_html(text, slug, run_tool_counts(run) or "no tools listed", tools)
        if run.status == SyncStatus.PARTIAL:
            text = "{} of {} succeeded in part ({}): see why tools were rejected in {}."
            return messages.WARNING, format_html(text, sync, slug, run_tool_counts(run), details)
        # The run's error repeats the server's URL: cut to its origin for who may not read the connection (redteam42).
        run_error = url_paths_cut(run.error) if connection_hidden(request, server) else run.error
        if run.status == SyncStatus.FAILED:  # the error and the next step here: the operator is on the form now
            text = "{} of {} failed: {}. Its tools are hidden until a sync succeeds. {} (Details: {}.)"
            error = Truncator(run_error.removeprefix(f"{slug}: ")).chars(300).rstrip(".")
            return messages.ERROR, format_html(text, sync, slug, error, sync_failed_next(run.error), details)
        if run.status == SyncStatus.SKIPPED:  # why: the run's error (disabled, archived, another run under way)
            text = "{} of {} did not run: {}.{}"
            restart = " To sync it again, set its status back to Active (Health, on its page) and save."
            restart = restart if server.status in OPERATOR_STOPPED_STATUSES else ""
            return messages.WARNING, format_html(text, sync, slug, run_error, restart)
        return messages.WARNING, format_html("{} of {}: {} (see {}).", sync, slug, run.get_status_display(), details)

    def access_note(self, server: Server) -> str:
        """Who sees the new server's tools; the access sections (governance) say it better."""
        return "Its tools are visible to nobody until someone is given discover."

    def save_model(self, request: HttpRequest, obj: Server, form: Any, change: bool) -> None:
        super().save_model(request, obj, form, change)
        if "openapi_document" in form.cleaned_data:
            server_openapi_document_set(server=obj, text=form.cleaned_data["openapi_document"] or "")

    def formfield_for_dbfield(self, db_field: models.Field, request: HttpRequest, **kwargs: Any) -> Any:
        if isinstance(db_field, models.URLField):
            kwargs["assume_scheme"] = "https"  # a URL typed without a scheme is taken as https (Django 6 default)
        formfield = super().formfield_for_dbfield(db_field, request, **kwargs)
        if db_field.name == "alternatives" and formfield is not None:
            # An alternative is a server already registered: no "+" popup to register a new server from this field.
            formfield.widget.can_add_related = False
        return formfield

    def get_queryset(self, request: HttpRequest) -> QuerySet[Server]:
        latest_run = SyncRun.objects.filter(server=OuterRef("pk")).order_by("-started_at", "-id")
        return (
            super()
            .get_queryset(request)
            .annotate(
                **tool_count_annotations(),
                last_run_status=Subquery(latest_run.values("status")[:1]),
                last_run_pk=Subquery(latest_run.values("pk")[:1]),
            )
        )

    def _health_badge(self, server: Server) -> str:
        # Not "Active": nobody has contacted it yet. A first sync that failed made it Unavailable: that says so.
        untried = server.last_synced_at is None and server.status == ServerStatus.ACTIVE
        if untried and server.transport != Transport.IMPORTED:
            return badge("never", "Never synced")
        return badge(server.status, server.get_status_display())

    @admin.display(description="status", ordering="status")
    def status_badge(self, server: Server) -> str:
        if server.pk is None:
            return "—"
        if server.status not in SERVER_STATUS_HIDES_TOOLS:
            return self._health_badge(server)
        return format_html(
            '{}<br><small class="scout-tools-hidden">{}</small>', self._health_badge(server), TOOLS_HIDDEN_SHORT
        )

    @admin.display(description="health now")
    def health(self, server: Server) -> str:
        # The list's status column, beside the status an operator sets, with what it means for the tools' callers.
        if server.pk is None:
            return "—"
        note = SERVER_STATUS_HIDES_TOOLS.get(server.status)
        if note is None:
            return self._health_badge(server)
        return format_html('{} <span class="scout-tools-hidden">{}</span>', self._health_badge(server), note)

    @admin.display(description="calls")
    def breaker_badge(self, server: Server) -> str:
        """The circuit breaker of this worker process (catalog/breaker.py): open means calls fail fast. None for a
        server whose tools are hidden: no call reaches it, and a green "flowing" beside "Unavailable" read as a
        contradiction."""
        if server.status in SERVER_STATUS_HIDES_TOOLS:
            return "—"
        state = breaker.breaker_state(server.pk)
        colour_key, label, meaning = BREAKER_BADGES[state]
        return format_html('<span title="{}">{}</span>', meaning, badge(colour_key, label))

    # Both break where a reader would, and a long run of letters anywhere: one long slug hid the health and last sync.
    slug_column = breakable_column("slug", description="slug")
    name_column = breakable_column("name", description="name")

    @admin.display(description="tools", ordering="live_tool_count")
    def tool_count(self, server: Server) -> str:
        return tool_count_links(server)

    def get_list_display(self, request: HttpRequest) -> Sequence[str]:
        # Curators read the server list but not sync runs: the run's status without a link they would get 403 from.
        if request.user.has_perm("catalog.view_syncrun"):
            return self.list_display
        return tuple("last_run_status_badge" if name == "last_run" else name for name in self.list_display)

    @admin.display(description="last sync", ordering="last_synced_at")
    def last_run(self, server: Server) -> str:
        return self._last_sync(server, linked=True)

    @admin.display(description="last sync", ordering="last_synced_at")
    def last_run_status_badge(self, server: Server) -> str:
        return self._last_sync(server, linked=False)

    def _last_sync(self, server: Server, *, linked: bool) -> str:
        """The last run's outcome (linked to the run for those who may read runs) over when it last synced. Under a
        run that did not sync, that time is the last good one, and said so: "Failed" over "—" read as a failure
        with no time, and over a time as a failure then; a server no sync ever succeeded for says so."""
        when = compact_time(server.last_synced_at)
        status = getattr(server, "last_run_status", None)
        if not status:
            return when
        outcome = run_status_badge(status)
        if status not in (SyncStatus.SUCCESS, SyncStatus.PARTIAL, SyncStatus.RUNNING):
            if server.last_synced_at is None:
                when = format_html('<small class="scout-never-synced">{}</small>', NEVER_SUCCEEDED)
            else:
                when = format_html("<small>last good:</small><br>{}", when)
        if linked:
            url = reverse("admin:catalog_syncrun_change", args=[server.last_run_pk])
            outcome = format_html('<a href="{}">{}</a>', url, outcome)
        return format_html("{}<br>{}", outcome, when)

    @admin.display(description="last error")
    def last_error_display(self, server: Server) -> str:
        return text_block(server.last_error)

    @admin.display(description="last error")
    def last_error_origins(self, server: Server) -> str:
        return text_block(url_paths_cut(server.last_error))

    @admin.action(description="Archive (hide from every client, keep history)", permissions=["change"])
    def archive(self, request: HttpRequest, queryset: QuerySet[Server]) -> None:
        queryset = self._status_settable(request, queryset)
        archived = [server.slug for server in queryset if server.status != "archived" and server_archive(server=server)]
        self.message_user(request, f"Archived {len(archived)} server(s): {', '.join(archived) or '—'}.")

    @admin.action(description="Restore archived servers (and sync them)", permissions=["change"])
    def restore(self, request: HttpRequest, queryset: QuerySet[Server]) -> None:
        restored = [server for server in self._status_settable(request, queryset) if server_restore(server=server)]
        self._queue_sync(request, restored)
        self.message_user(request, f"Restored {len(restored)} server(s).")

    def _status_settable(self, request: HttpRequest, queryset: QuerySet[Server]) -> list[Server]:
        """The servers whose status the caller may set (a shared one is a superuser's once there are tenants); the
        others are named in a message and left as they are."""
        settable, kept = [], []
        for server in queryset:
            (kept if "status" in server_fields_locked(request, server) else settable).append(server)
        if kept:
            names = ", ".join(server.slug for server in kept)
            self.message_user(request, f"Left as they are (shared by every tenant: a superuser's): {names}.")
        return settable

    def get_actions(self, request: HttpRequest) -> dict:
        actions = super().get_actions(request)
        actions.pop("delete_selected", None)  # delete one at a time, and only without history
        return actions

    def has_delete_permission(self, request: HttpRequest, obj: Server | None = None) -> bool:
        # A server whose tools were ever seen has history (revisions, reviews, audit): archive it instead.
        if obj is not None and obj.tools.exists():
            return False
        return super().has_delete_permission(request, obj)

    @admin.action(description="Sync now", permissions=["change"])
    def sync_now(self, request: HttpRequest, queryset: QuerySet[Server]) -> None:
        from catalog.tasks import sync_server

        servers = list(queryset)
        if sync_server.app.conf.task_always_eager:  # each sync runs in this request: say how each ended
            skipped = [server.slug for server in servers if server.transport == Transport.IMPORTED]
            for server in servers:
                if server.transport != Transport.IMPORTED:
                    self._sync_and_say(request, server)
        else:
            queued, skipped = self._queue_sync(request, servers)
            if queued:
                self.message_user(request, f"Sync queued for {len(queued)} server(s).", messages.SUCCESS)
        if skipped:
            self.message_user(request, f"Not synced (imported, no live connection): {', '.join(skipped)}.")

    def _queue_sync(self, request: HttpRequest, servers: list[Server]) -> tuple[list[SyncRun | None], list[str]]:
        """Sync each server; returns, for each one synced, its run when queued for a worker (None when it ran
        in-process), and the slugs of those not synced (imported)."""
        try:
            from catalog.tasks import sync_server_asked
        except ImportError as exc:  # the sync task may not be deployed yet; say so instead of failing
            self.message_user(request, f"Sync is not available: {exc}", messages.ERROR)
            return [], []
        queued: list[SyncRun | None] = []
        skipped: list[str] = []
        for server in servers:
            if server.transport == Transport.IMPORTED:
                skipped.append(server.slug)
                continue
            queued.append(sync_server_asked(server, "admin", request.user.pk))  # theirs: in their recent actions
        return queued, skipped

    def get_urls(self) -> list:
        sync_view = self.admin_site.admin_view(require_POST(self.sync_view))
        test_view = self.admin_site.admin_view(require_POST(self.test_connection_view))
        preview_view = self.admin_site.admin_view(self.openapi_preview_view)
        return [
            path("<int:object_id>/sync/", sync_view, name="catalog_server_sync"),
            path("<int:object_id>/openapi-preview/", preview_view, name="catalog_server_openapi_preview"),
            path("test-connection/", test_view, name="catalog_server_test_connection"),
            *super().get_urls(),
        ]

    def test_connection_view(self, request: HttpRequest) -> HttpResponse:
        """Connect with the form's connection fields and list the tools a sync would import; saves nothing."""
        # Only a server this admin may manage (governance narrows get_queryset to the admin's tenants): the form
        # keeps what it leaves out (stored header variables), so another tenant's id sent its credentials to the URL
        # typed here. Any other value tests a new server.
        server_pk = request.GET.get("server", "")
        existing = self.get_queryset(request).filter(pk=server_pk).first() if server_pk.isdigit() else None
        allowed = self.has_change_permission(request, existing) if existing else self.has_add_permission(request)
        if not allowed:
            raise PermissionDenied
        form_class = self.get_form(request, existing, fields=CONNECTION_TEST_FIELDS)
        form = form_class(request.POST, request.FILES, instance=existing or Server())
        tools: list[dict[str, Any]] = []
        rejections: list[dict[str, str]] = []
        error = ""
        if form.is_valid():
            candidate = form.save(commit=False)  # never saved: only its connection settings are used
            try:
                if candidate.transport == Transport.OPENAPI:  # the form's document, or its URL; else the stored one
                    definitions, rejections = server_openapi_preview(
                        server=candidate, document=form.cleaned_data.get("openapi_document")
                    )
                    tools = [definition.canonical() for definition in definitions]
                else:
                    tools = list_tools(candidate)
            except UpstreamError as exc:
                # A stored connection the tester may not read (a shared server's URL) is not spelt out by its error.
                error = url_paths_cut(str(exc)) if connection_hidden(request, existing) else str(exc)
        else:
            error = "; ".join(f"{field}: {' '.join(errors)}" for field, errors in form.errors.items())
        slug = existing.slug if existing else form.data.get("slug", "")  # a saved server's slug is not posted
        context = {
            **self.admin_site.each_context(request),
            "opts": self.opts,
            "title": f"Test connection: {slug}" if slug else "Test connection",
            "server": existing,
            "slug": slug,
            "tools": [
                {
                    "name": tool.get("name", ""),
                    "description": tool.get("description") or "",
                    "annotations": tool.get("annotations") or {},
                }  # fmt: skip
                for tool in tools
                if isinstance(tool, dict)
            ],
            "rejections": rejections,
            "error": error,
            # Saved or not, changed or not: the step after this page (a new server is synced when saved).
            "next_step": connection_test_next(error=error, new=existing is None, changed=bool(form.changed_data)),
            **self._save_tested(request, existing, saveable=not error and (existing is None or form.has_changed())),
        }
        return render(request, "admin/catalog/server/test_connection.html", context)

    def _save_tested(self, request: HttpRequest, existing: Server | None, *, saveable: bool) -> dict[str, Any]:
        """What the test page's Save button posts: the form as tested, to the page it came from (which checks it and
        the caller's permissions as ever). The page said "Save the server" and offered only the way back (adminux25).
        None for a file the form uploaded, which a page cannot send again."""
        if not saveable or request.FILES:
            return {}
        url = reverse("admin:catalog_server_change", args=[existing.pk]) if existing else None
        skipped = {"csrfmiddlewaretoken", "_test_connection"}
        fields = [(name, value) for name, values in request.POST.lists() if name not in skipped for value in values]
        return {"save_url": url or reverse("admin:catalog_server_add"), "save_fields": fields}

    def openapi_preview_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        """The operations a sync would import and refuse, read from the document now; nothing is saved."""
        server = get_object_or_404(self.get_queryset(request), pk=object_id)  # another tenant's: unknown (Z12)
        if not self.has_change_permission(request, server) or server.transport != Transport.OPENAPI:
            raise PermissionDenied
        error, rows, rejections = "", [], []
        try:
            definitions, rejections = server_openapi_preview(server=server)
        except UpstreamError as exc:
            error = url_paths_cut(str(exc)) if connection_hidden(request, server) else str(exc)
        else:
            existing = set(server.tools.live().values_list("name", flat=True))
            for definition in definitions:
                binding = definition.input_schema.get(BINDING_KEY) or {}
                hints = definition.annotations or {}
                rows.append(
                    {
                        "name": definition.name,
                        "new": definition.name not in existing,
                        "request": f"{binding.get('method', '?')} {binding.get('path', '?')}",
                        "title": definition.title,
                        "parameters": ", ".join((definition.input_schema.get("properties") or {}).keys()),
                        "hints": ", ".join(key.removesuffix("Hint") for key, on in hints.items() if on is True),
                    }
                )
        context = {
            **self.admin_site.each_context(request),
            "title": f"Operations in {server.slug}'s OpenAPI document",
            "opts": self.model._meta,
            "original": server,
            "error": error,
            "rows": rows,
            "rejections": rejections,
        }
        return TemplateResponse(request, "admin/catalog/server/openapi_preview.html", context)

    def _sync_queued_message(
        self, request: HttpRequest, server: Server, run: SyncRun | None, *, first: bool = False
    ) -> str:
        """What follows "Sync now" or a new server: a worker runs it a moment later. Its run is recorded queued at
        once (mend3): who may read runs gets a link to it, whose page shows its progress until it ends."""
        sync = "First sync" if first else "Sync"
        if run is None or not request.user.has_perm("catalog.view_syncrun"):
            return f"{sync} of {server.slug} queued."
        return format_html(
            '{} of {} queued: follow it on <a id="queued-sync-run" href="{}">its run</a>, which shows its progress'
            " until it ends.",
            sync,
            server.slug,
            reverse("admin:catalog_syncrun_change", args=[run.pk]),
        )

    def sync_view(self, request: HttpRequest, object_id: int) -> HttpResponse:
        server = get_object_or_404(self.get_queryset(request), pk=object_id)  # another tenant's: unknown (Z12)
        if not self.has_change_permission(request, server):
            raise PermissionDenied
        if server.transport == Transport.IMPORTED:
            self.message_user(request, f"Imported server {server.slug} has no live connection: re-import its file.")
        else:
            self._sync_and_say(request, server)
        return HttpResponseRedirect(reverse("admin:catalog_server_change", args=[server.pk]))
