"""Server writes for operators: register, edit, archive. Credentials are never stored, only variable names."""

from typing import Any

from django.core.exceptions import ValidationError
from django.db import transaction

from catalog.choices import ServerStatus, Transport
from catalog.models import Server, validate_server_slug, validate_upstream_url

# What an operator may set; slug (the tool-id namespace) only at creation, status only through archive.
EDITABLE_FIELDS = (
    "name",
    "description",
    "category",
    "environment",
    "transport",
    "command",
    "args",
    "env_vars",
    "url",
    "header_env",
)


def _url_check(url: str) -> None:
    try:
        validate_upstream_url(url)
    except ValidationError as error:
        raise ValidationError({"url": error.messages}) from None


def server_create(*, slug: str, name: str, **fields: Any) -> Server:
    """Register a server (ACTIVE; its tools appear after its first sync). Raises ValidationError, for a slug too
    when it is not letters, digits, "-" and "_" (imports, which create servers of their own, keep their names)."""
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise TypeError(f"not server fields: {sorted(unknown)}")
    server = Server(slug=slug, name=name, **fields)
    try:
        validate_server_slug(slug)
    except ValidationError as error:
        raise ValidationError({"slug": error.messages}) from None
    server.full_clean()
    if server.transport == Transport.HTTP:
        _url_check(server.url)
    server.save()
    return server


def server_update(*, server: Server, **fields: Any) -> Server:
    """Change the given fields (any of EDITABLE_FIELDS). Raises ValidationError, TypeError for others."""
    unknown = set(fields) - set(EDITABLE_FIELDS)
    if unknown:
        raise TypeError(f"not editable server fields: {sorted(unknown)}")
    with transaction.atomic():
        server = Server.objects.select_for_update().get(pk=server.pk)
        for name, value in fields.items():
            setattr(server, name, value)
        server.full_clean()
        if server.transport == Transport.HTTP and {"url", "transport"} & set(fields):
            _url_check(server.url)
        server.save(update_fields=[*fields, "updated_at"])
    return server


def server_archive(*, server: Server) -> Server:
    """Retire a server: its tools leave search, listing and execution at once (only ACTIVE servers' tools
    are visible) and no sync or import runs against it again. Archiving twice is a no-op.

    save(), not update(): the post_save signal is what invalidates every cached visible set."""
    with transaction.atomic():
        server = Server.objects.select_for_update().get(pk=server.pk)
        if server.status != ServerStatus.ARCHIVED:
            server.status = ServerStatus.ARCHIVED
            server.save(update_fields=["status", "updated_at"])
    return server


def server_restore(*, server: Server) -> bool:
    """Bring an archived server back (ACTIVE; its tools are served again after the next sync confirms them).
    Returns whether it changed."""
    with transaction.atomic():
        server = Server.objects.select_for_update().get(pk=server.pk)
        if server.status != ServerStatus.ARCHIVED:
            return False
        server.status = ServerStatus.ACTIVE
        server.save(update_fields=["status", "updated_at"])
    return True
