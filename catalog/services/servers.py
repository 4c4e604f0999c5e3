"""Server lifecycle the admin drives: archive (hidden from every client, history kept) and restore."""

from catalog.choices import ServerStatus
from catalog.models import Server


def server_archive(*, server: Server) -> bool:
    """Hide the server and all its tools from every client and stop syncing it; tools, revisions, runs, grants
    and the audit trail stay. Returns whether it changed. A saved status change invalidates every visible set
    (governance's receivers), so no client sees its tools after this returns."""
    if server.status == ServerStatus.ARCHIVED:
        return False
    server.status = ServerStatus.ARCHIVED
    server.save(update_fields=["status", "updated_at"])
    return True


def server_restore(*, server: Server) -> bool:
    """Bring an archived server back (its tools are served again after the next sync confirms them).
    Returns whether it changed."""
    if server.status != ServerStatus.ARCHIVED:
        return False
    server.status = ServerStatus.ACTIVE
    server.save(update_fields=["status", "updated_at"])
    return True
