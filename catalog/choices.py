from django.db import models


class Transport(models.TextChoices):
    STDIO = "stdio", "stdio (local process)"
    HTTP = "http", "Streamable HTTP"
    OPENAPI = "openapi", "OpenAPI (REST service)"
    IMPORTED = "imported", "Imported (no live connection)"


class ServerStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    DEGRADED = "degraded", "Degraded"
    UNAVAILABLE = "unavailable", "Unavailable"
    DISABLED = "disabled", "Disabled"
    ARCHIVED = "archived", "Archived"


# Statuses an operator set: a sync or import never runs against them nor changes them back.
OPERATOR_STOPPED_STATUSES = (ServerStatus.DISABLED, ServerStatus.ARCHIVED)


class SyncKind(models.TextChoices):
    SYNC = "sync", "Sync from server"
    IMPORT = "import", "Import from file"


class SyncStatus(models.TextChoices):
    RUNNING = "running", "Running"
    SUCCESS = "success", "Succeeded"
    PARTIAL = "partial", "Succeeded with rejected tools"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped (another run holds the lock)"


class OpenAPICredentialKind(models.TextChoices):
    """How a credential named in Server.openapi_credentials is sent."""

    API_KEY = "api_key", "API key"
    BEARER = "bearer", "Bearer token (Authorization header)"
    BASIC = "basic", "HTTP basic auth"


class OpenAPICredentialPlace(models.TextChoices):
    HEADER = "header", "Header"
    QUERY = "query", "Query parameter"
    COOKIE = "cookie", "Cookie"
