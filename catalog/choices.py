from django.db import models


class Transport(models.TextChoices):
    STDIO = "stdio", "stdio (local process)"
    HTTP = "http", "Streamable HTTP"
    IMPORTED = "imported", "Imported (no live connection)"


class ServerStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    DEGRADED = "degraded", "Degraded"
    UNAVAILABLE = "unavailable", "Unavailable"
    DISABLED = "disabled", "Disabled"
    ARCHIVED = "archived", "Archived (hidden from every client, history kept)"


# Servers nobody syncs or serves: an operator's "disabled" and "archived" outlive syncs and re-imports.
INACTIVE_SERVER_STATUSES = (ServerStatus.DISABLED, ServerStatus.ARCHIVED)


class SyncKind(models.TextChoices):
    SYNC = "sync", "Sync from server"
    IMPORT = "import", "Import from file"


class SyncStatus(models.TextChoices):
    RUNNING = "running", "Running"
    SUCCESS = "success", "Succeeded"
    PARTIAL = "partial", "Succeeded with rejected tools"
    FAILED = "failed", "Failed"
    SKIPPED = "skipped", "Skipped (another run holds the lock)"
