"""The tool catalog: upstream servers, their tools, every distinct upstream definition, curation.

Upstream text (what a server's ``tools/list`` said) and curated text (what a curator wrote to make a tool
findable) are kept apart: a sync writes only the upstream fields, a curator edits only the curated ones.
"""

import re
import secrets

from django.conf import settings
from django.core.exceptions import ValidationError
from django.db import models
from django.utils.text import slugify

from .choices import OpenAPICredentialKind, OpenAPICredentialPlace, ServerStatus, SyncKind, SyncStatus, Transport
from .constants import TOOL_ID_SEPARATOR
from .definitions import tool_deprecated
from .egress import EgressRefused, egress_check
from .fields import OrderedJSONField


def validate_namespace(value: str) -> None:
    if TOOL_ID_SEPARATOR in value:
        raise ValidationError(f"must not contain {TOOL_ID_SEPARATOR!r}")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValidationError("must not contain control characters")
    if value != value.strip():
        raise ValidationError("must not start or end with whitespace")


SERVER_SLUG_RE = re.compile(r"[A-Za-z0-9_-]+")


def validate_server_slug(value: str) -> None:
    """A slug an operator gives a server: letters, digits, "-" and "_" (it names the server in every tool id).

    Imported catalog files keep their own names (``validate_namespace`` only): public dumps use names with spaces.
    """
    if not SERVER_SLUG_RE.fullmatch(value):
        suggestion = slugify(value) or "my-server"
        raise ValidationError(
            f"Use only letters, digits, hyphens and underscores (no spaces or other characters), e.g. {suggestion!r}."
        )


def validate_env_var_names(value: object) -> None:
    names = value.values() if isinstance(value, dict) else value
    if not isinstance(names, list | type({}.values())):
        raise ValidationError("must be a list of environment variable names")
    for name in names:
        if not isinstance(name, str) or not name.replace("_", "a").isalnum() or name[:1].isdigit():
            raise ValidationError(f"{name!r} is not an environment variable name")


def _is_env_var_name(name: object) -> bool:
    return isinstance(name, str) and bool(name) and name.replace("_", "a").isalnum() and not name[:1].isdigit()


def validate_env_var_name(value: object) -> None:
    """One environment variable name (a field that names where a secret is, never the secret)."""
    if not _is_env_var_name(value):
        raise ValidationError(f"{value!r} is not an environment variable name")


def validate_openapi_credentials(value: object) -> None:
    """A list of credential references; each names environment variables, never a value.

    ``{"type": "api_key", "in": "header"|"query"|"cookie", "name": "X-API-Key", "env": "VAR"}``,
    ``{"type": "bearer", "env": "VAR"}`` or ``{"type": "basic", "username_env": "U", "password_env": "P"}``.
    """
    if not isinstance(value, list):
        raise ValidationError("must be a JSON array of credential objects")
    required = {
        OpenAPICredentialKind.API_KEY: {"type", "in", "name", "env"},
        OpenAPICredentialKind.BEARER: {"type", "env"},
        OpenAPICredentialKind.BASIC: {"type", "username_env", "password_env"},
    }
    for index, item in enumerate(value):
        kind = item.get("type") if isinstance(item, dict) else None
        if kind not in required:
            raise ValidationError(f"credential #{index}: type must be one of {', '.join(required)}")
        if set(item) != required[kind]:
            raise ValidationError(f"credential #{index} ({kind}): needs exactly the keys {sorted(required[kind])}")
        for key in ("env", "username_env", "password_env"):
            if key in item and not _is_env_var_name(item[key]):
                raise ValidationError(f"credential #{index}: {item[key]!r} is not an environment variable name")
        if kind == OpenAPICredentialKind.API_KEY:
            if item["in"] not in OpenAPICredentialPlace.values:
                raise ValidationError(f"credential #{index}: 'in' must be one of {', '.join(OpenAPICredentialPlace)}")
            name = item["name"]
            if not isinstance(name, str) or not name or not name.isascii() or not name.isprintable() or " " in name:
                raise ValidationError(f"credential #{index}: {name!r} is not a header, query or cookie name")


# Each transport's own fields (the admin's form adds the OpenAPI document, a form field, to OpenAPI's).
TRANSPORT_FIELDS = {
    Transport.STDIO: ("command", "args", "env_vars"),
    Transport.HTTP: ("url", "header_env"),
    Transport.OPENAPI: ("base_url", "openapi_url", "openapi_credentials"),
    Transport.IMPORTED: (),
}
# The same with the admin form's own fields for the OpenAPI document (an upload, pasted text).
FORM_TRANSPORT_FIELDS = {
    **TRANSPORT_FIELDS,
    Transport.OPENAPI: (*TRANSPORT_FIELDS[Transport.OPENAPI], "openapi_upload", "openapi_document"),
}


def field_is_empty(value: object) -> bool:
    return value in (None, "", [], {}) or (isinstance(value, str) and value.isspace())


def transport_field_refusal(name: str, transport: str) -> str:
    """The refusal of a value in ``name``, a field of a transport other than ``transport`` (the server's)."""
    owner = next(Transport(other) for other, names in FORM_TRANSPORT_FIELDS.items() if name in names)
    return (
        f"Only for {owner.label} servers, and this one is {Transport(transport).label}: "
        "empty this field or choose another transport."
    )


def other_transports_fields(server: "Server") -> list[str]:
    """The fields of transports other than ``server``'s that hold a value (none for an unknown transport)."""
    if server.transport not in TRANSPORT_FIELDS:
        return []
    return [
        name
        for other, names in TRANSPORT_FIELDS.items()
        if other != server.transport
        for name in names
        if not field_is_empty(getattr(server, name))
    ]


class Server(models.Model):
    """An upstream MCP server or OpenAPI service. Its slug namespaces its tools (``slug::tool``).

    Credentials are never stored: the server names environment variables whose values are passed to the
    process (stdio) or sent as headers (HTTP, OpenAPI) when Scout connects. An OpenAPI service's document
    is fetched from ``openapi_url`` or stored beside the server (OpenAPIDocument).
    """

    slug = models.CharField(
        max_length=200, unique=True, validators=[validate_namespace], help_text="Namespace in tool ids: slug::tool"
    )
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    category = models.CharField(max_length=100, blank=True)
    environment = models.CharField(max_length=50, default="production", help_text="e.g. production, development")
    transport = models.CharField(max_length=20, choices=Transport.choices, default=Transport.STDIO)
    command = models.CharField(max_length=500, blank=True, help_text="stdio: the executable to start")
    args = models.JSONField(default=list, blank=True, help_text="stdio: the argument list (JSON array)")
    env_vars = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_env_var_names],
        help_text="stdio: names of environment variables passed to the process (values are never stored)",
    )
    url = models.URLField(max_length=500, blank=True, help_text="Streamable HTTP: the endpoint URL")
    header_env = models.JSONField(
        default=dict,
        blank=True,
        validators=[validate_env_var_names],
        help_text='HTTP: header name -> environment variable holding its value, e.g. {"Authorization": "X_TOKEN"}',
    )
    openapi_url = models.URLField(
        max_length=500, blank=True, help_text="OpenAPI: where to fetch the OpenAPI 3.0/3.1 document (JSON or YAML)"
    )
    base_url = models.URLField(
        max_length=500,
        blank=True,
        help_text="OpenAPI: where requests go, e.g. https://api.example.com/v1 (the document's servers are ignored)",
    )
    openapi_credentials = models.JSONField(
        default=list,
        blank=True,
        validators=[validate_openapi_credentials],
        help_text='OpenAPI: credentials by environment variable name, e.g. [{"type": "bearer", "env": "PETS_TOKEN"}]',
    )
    status = models.CharField(max_length=20, choices=ServerStatus.choices, default=ServerStatus.ACTIVE)
    alternatives = models.ManyToManyField(
        "self",
        blank=True,
        help_text="Servers that publish the same tools on purpose (mirrors, regions, two vendors of one API): a "
        "tool named and written like one of theirs is not held for review as a copy (shadowing, T8).",
    )
    last_synced_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["slug"]
        permissions = [
            ("discover_server", "Can discover the server's tools"),
            ("execute_server", "Can execute the server's tools"),
            ("approve_server", "Can approve calls to the server's tools"),
        ]

    def __str__(self) -> str:
        return self.slug

    def unique_error_message(self, model_class: type[models.Model], unique_check: tuple[str, ...]) -> ValidationError:
        if unique_check == ("slug",):
            return ValidationError(slug_unavailable_message(self.slug), code="unique")
        return super().unique_error_message(model_class, unique_check)

    def clean(self) -> None:
        if self.transport == Transport.STDIO and not self.command:
            raise ValidationError({"command": "A stdio server needs a command."})
        if self.transport == Transport.HTTP and not self.url:
            raise ValidationError({"url": "A Streamable HTTP server needs a URL."})
        if self.transport == Transport.OPENAPI:
            if not self.base_url:
                raise ValidationError({"base_url": "An OpenAPI server needs the base URL its requests go to."})
        other = {name: transport_field_refusal(name, self.transport) for name in other_transports_fields(self)}
        if other:  # the admin, REST and the services alike: a field that would be kept but never used
            raise ValidationError(other)
        if not isinstance(self.args, list) or not all(isinstance(a, str) for a in self.args):
            raise ValidationError({"args": "Arguments must be a JSON array of strings."})
        if not isinstance(self.header_env, dict):
            raise ValidationError({"header_env": "Must be a JSON object of header name -> variable name."})


def slug_unavailable_message(slug: str) -> str:
    """The one answer for a slug some server has, whoever may see that server (slugs are install-wide: tool ids
    name them). It names no server, and its suggestion has a random suffix, so it says nothing about which other
    slugs are taken."""
    base = (slugify(slug) or "server")[:190]
    suggestion = f"{base}-{secrets.token_hex(2)}"
    for _ in range(5):
        if not Server.objects.filter(slug=suggestion).exists():
            break
        suggestion = f"{base}-{secrets.token_hex(3)}"
    return (
        f"This slug is not available: slugs are unique across the whole install. Choose another, e.g. {suggestion!r}."
    )


def validate_upstream_url(url: str) -> None:
    """An upstream URL (an HTTP MCP server's, an OpenAPI service's base or document URL), when it is registered or
    changed (``catalog.services.servers.server_upstream_hosts_check``): its host must be in SCOUT_UPSTREAM_ALLOWED_HOSTS
    (its address is checked again, and pinned, at every connection, ``catalog.upstream``). Not part of
    ``Server.clean``: a server registered before its host left the list stays editable (its grants, say), and
    simply cannot connect. Raises ValidationError."""
    try:
        egress_check(url, resolve=False)
    except EgressRefused as exc:
        # What to do, too: an operator rarely sets Scout's environment, and the setting's name alone left them there.
        raise ValidationError(
            f"{exc} (the hosts Scout may connect to): correct the URL, or ask whoever runs Scout to list this host "
            "there and restart Scout"
        ) from None


class OpenAPIDocument(models.Model):
    """The OpenAPI document stored for a server (configuration, not a secret; used instead of a URL).

    Kept off the Server row: a large document (GitHub's is 13 MB) must not ride along with every query that
    joins a tool to its server.
    """

    server = models.OneToOneField(Server, on_delete=models.CASCADE, primary_key=True, related_name="openapi_spec")
    text = models.TextField(help_text="The document, JSON or YAML")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "OpenAPI document"

    def __str__(self) -> str:
        return f"OpenAPI document of {self.server_id}"


class ToolQuerySet(models.QuerySet["Tool"]):
    def live(self) -> "ToolQuerySet":
        """Tools the upstream server still lists."""
        return self.filter(removed_at__isnull=True)


class Tool(models.Model):
    """One upstream tool, identified as ``server::name``. Tombstoned (``removed_at``), never deleted."""

    server = models.ForeignKey(Server, on_delete=models.CASCADE, related_name="tools")
    name = models.CharField(max_length=255, help_text="The upstream tool name")
    tool_id = models.CharField(max_length=460, unique=True, help_text="server::name")
    # Upstream copy: written by sync and import only.
    upstream_title = models.CharField(max_length=500, blank=True)
    description = models.TextField(blank=True)
    # Kept as the upstream wrote them, keys in its order (``OrderedJSONField``): a jsonb column reordered them.
    input_schema = OrderedJSONField(default=dict)
    output_schema = OrderedJSONField(null=True, blank=True)
    annotations = OrderedJSONField(null=True, blank=True)
    definition_hash = models.CharField(max_length=64, db_index=True)
    # Outside the definition and its hash (``ToolDefinition.deprecated``): a change is no review, only a reindex.
    upstream_deprecated = models.BooleanField(
        default=False, help_text="The upstream flags it deprecated (an OpenAPI operation's deprecated: true)"
    )
    first_seen_at = models.DateTimeField()
    last_seen_at = models.DateTimeField()
    removed_at = models.DateTimeField(null=True, blank=True, db_index=True)
    enabled = models.BooleanField(default=True)
    # Curation: written by curators only; a sync never touches these.
    title = models.CharField(max_length=200, blank=True, help_text="Curated display title")
    purpose = models.TextField(blank=True, help_text="Curated purpose: what a user would want this tool for")
    entity_types = models.JSONField(default=list, blank=True, help_text="e.g. issue, repository, invoice")
    operation_verbs = models.JSONField(default=list, blank=True, help_text="e.g. create, list, delete")
    related_tools = models.ManyToManyField("self", blank=True, symmetrical=False)
    curated_at = models.DateTimeField(null=True, blank=True)

    objects = ToolQuerySet.as_manager()

    class Meta:
        ordering = ["tool_id"]
        constraints = [models.UniqueConstraint(fields=["server", "name"], name="catalog_tool_unique_name")]
        permissions = [
            ("discover_tool", "Can discover the tool"),
            ("execute_tool", "Can execute the tool"),
            ("approve_tool", "Can approve calls to the tool"),
        ]

    def __str__(self) -> str:
        return self.tool_id

    @property
    def display_title(self) -> str:
        return self.title or self.upstream_title or self.name

    @property
    def deprecated(self) -> bool:
        """Its upstream marks it deprecated, by flag or in its own words (``catalog.definitions.tool_deprecated``)."""
        return tool_deprecated(
            flagged=self.upstream_deprecated,
            name=self.name,
            title=self.title or self.upstream_title,
            description=self.description,
        )

    def upstream_definition(self) -> dict:
        """The upstream definition as hashed and stored in revisions (catalog.definitions.ToolDefinition)."""
        return {
            "name": self.name,
            "title": self.upstream_title,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
            "annotations": self.annotations,
        }


class ToolRevision(models.Model):
    """Every distinct upstream definition a tool has had, so changes can be diffed and reviewed."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="revisions")
    definition_hash = models.CharField(max_length=64)
    definition = OrderedJSONField(help_text="Canonical definition: name, title, description, schemas, annotations")
    created_at = models.DateTimeField()
    sync_run = models.ForeignKey("SyncRun", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")

    class Meta:
        ordering = ["-created_at", "-id"]
        get_latest_by = "created_at"
        constraints = [
            models.UniqueConstraint(fields=["tool", "definition_hash"], name="catalog_revision_unique_hash"),
        ]

    def __str__(self) -> str:
        return f"{self.tool_id} @ {self.definition_hash[:12]}"

    def previous(self) -> "ToolRevision | None":
        return (
            ToolRevision.objects.filter(tool_id=self.tool_id, created_at__lte=self.created_at)
            .exclude(pk=self.pk)
            .filter(models.Q(created_at__lt=self.created_at) | models.Q(pk__lt=self.pk))
            .order_by("-created_at", "-id")
            .first()
        )


class CurationPhrase(models.Model):
    """A curated phrase attached to a tool (base for aliases, keywords, examples, negative queries)."""

    text = models.CharField(max_length=500)

    class Meta:
        abstract = True
        ordering = ["id"]

    def __str__(self) -> str:
        return self.text


class ToolAlias(CurationPhrase):
    """Another name people use for the tool."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="aliases")

    class Meta(CurationPhrase.Meta):
        verbose_name_plural = "aliases"


class ToolKeyword(CurationPhrase):
    """A search keyword for the tool."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="keywords")


class ToolExample(CurationPhrase):
    """An example request the tool serves ("synthetic query")."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="examples")

    class Meta(CurationPhrase.Meta):
        verbose_name = "example request"


class ToolNegativeExample(CurationPhrase):
    """A request the tool must not be chosen for ("not for ...")."""

    tool = models.ForeignKey(Tool, on_delete=models.CASCADE, related_name="negative_examples")

    class Meta(CurationPhrase.Meta):
        verbose_name = "negative query"


class SyncRun(models.Model):
    """One sync of a server or one import of a file, with what it changed."""

    server = models.ForeignKey(Server, null=True, blank=True, on_delete=models.CASCADE, related_name="sync_runs")
    kind = models.CharField(max_length=20, choices=SyncKind.choices, default=SyncKind.SYNC)
    source = models.CharField(max_length=500, blank=True, help_text="File imported, or what triggered the sync")
    # The operator who asked for this sync (the admin's "Sync now", a new server's first sync, the REST API): their
    # home lists it under "Your recent actions" with its outcome. None for the beat, a notice or a command.
    started_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="sync_runs_started"
    )
    status = models.CharField(max_length=20, choices=SyncStatus.choices, default=SyncStatus.RUNNING)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    added = models.PositiveIntegerField(default=0)
    changed = models.PositiveIntegerField(default=0)
    unchanged = models.PositiveIntegerField(default=0)
    removed = models.PositiveIntegerField(default=0)
    rejected = models.PositiveIntegerField(default=0)
    error = models.TextField(blank=True)
    rejections = models.JSONField(default=list, blank=True, help_text="Tools refused, each with its reason")
    # A sync is list then apply: total stays 0 while the upstream is listed, then is the tools listed.
    progress_done = models.PositiveIntegerField(default=0, help_text="tools applied")
    progress_total = models.PositiveIntegerField(default=0, help_text="tools listed (0 while listing)")

    class Meta:
        ordering = ["-started_at", "-id"]

    def __str__(self) -> str:
        return f"{self.kind} {self.server or self.source} {self.started_at:%Y-%m-%d %H:%M:%S} {self.status}"

    @property
    def duration_seconds(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class QueuedTask(models.Model):
    """A Celery task that could not be handed to the broker (Redis down): kept here and sent again once the
    broker is back (catalog/outbox.py, SECURITY-TESTS F4). Deleted when sent."""

    task_id = models.CharField(max_length=64, unique=True, help_text="The id the caller was given")
    name = models.CharField(max_length=200)
    args = models.JSONField(default=list, blank=True)
    kwargs = models.JSONField(default=dict, blank=True)
    queue = models.CharField(max_length=200, blank=True)
    eta = models.DateTimeField(null=True, blank=True, help_text="Not to run before (a countdown asked for)")
    created_at = models.DateTimeField(auto_now_add=True)
    attempts = models.PositiveIntegerField(default=0, help_text="Failed sends since it was recorded")
    last_error = models.CharField(max_length=500, blank=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return f"{self.name} {self.task_id}"
