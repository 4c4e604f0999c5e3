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


# What a server's status means for its tools' callers: only an Active server's tools reach clients (search, inspect,
# execute), which operators may not expect of a Degraded one (one failed sync). Shown wherever health is.
SERVER_STATUS_HIDES_TOOLS = {
    ServerStatus.DEGRADED: "Its tools are hidden from clients (search, inspect, execute) until a sync succeeds: its "
    "last sync failed.",
    ServerStatus.UNAVAILABLE: "Its tools are hidden from clients (search, inspect, execute) until a sync succeeds.",
    ServerStatus.DISABLED: "Its tools are hidden from clients and it is not synced until it is set back to Active.",
    ServerStatus.ARCHIVED: "Its tools are hidden from every client; restore it to serve them again.",
}
TOOLS_HIDDEN_SHORT = "tools hidden from clients"
# What an operator does about a failed sync: said on the server's page and the failed run's.
SYNC_FAILED_FIX = (
    "To fix it: correct the connection (the command, its arguments or the URL, or a variable it needs in Scout's "
    "environment)."
)
SYNC_FAILED_THEN = (
    "Test connection at the bottom of the server's page checks it without saving; then save and Sync now."
)
SYNC_FAILED_NEXT = f"{SYNC_FAILED_FIX} {SYNC_FAILED_THEN}"

# Statuses an operator set: a sync or import never runs against them nor changes them back.
OPERATOR_STOPPED_STATUSES = (ServerStatus.DISABLED, ServerStatus.ARCHIVED)


class SyncKind(models.TextChoices):
    SYNC = "sync", "Sync from server"
    IMPORT = "import", "Import from file"


class SyncStatus(models.TextChoices):
    # Asked for and handed to the broker: a worker has not started it yet (it then runs this same run).
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCESS = "success", "Succeeded"
    PARTIAL = "partial", "Succeeded with rejected tools"
    FAILED = "failed", "Failed"
    # Not "Skipped (another run holds the lock)": a run is also not run for a disabled, archived or imported server,
    # and operators read the lock as a stuck run to hunt down. Why it did not run is the run's error.
    SKIPPED = "skipped", "Not run"


class OpenAPICredentialKind(models.TextChoices):
    """How a credential named in Server.openapi_credentials is sent."""

    API_KEY = "api_key", "API key"
    BEARER = "bearer", "Bearer token (Authorization header)"
    BASIC = "basic", "HTTP basic auth"


class OpenAPICredentialPlace(models.TextChoices):
    HEADER = "header", "Header"
    QUERY = "query", "Query parameter"
    COOKIE = "cookie", "Cookie"
