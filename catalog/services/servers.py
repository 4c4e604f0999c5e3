"""Server writes for operators: register, edit, archive. Credentials are never stored, only variable names."""

from collections.abc import Iterable, Mapping
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


# Where each transport's requests go: checked against SCOUT_UPSTREAM_ALLOWED_HOSTS when set or changed.
UPSTREAM_URL_FIELDS = {Transport.HTTP: ("url",), Transport.OPENAPI: ("base_url", "openapi_url")}


def server_upstream_hosts_check(*, transport: str, values: Mapping[str, Any], changed: Iterable[str] | None) -> None:
    """The hosts a server registered or edited would be reached at must be in SCOUT_UPSTREAM_ALLOWED_HOSTS (the admin
    form, REST and the services alike; the address is checked again, and pinned, at every connection). ``values``
    holds the server's fields; ``changed`` names those set now (None: a new server, all of them), so a server whose
    host left the list stays editable (its grants, say) while its URL is not touched. Raises ValidationError by
    field."""
    changed = None if changed is None or "transport" in changed else set(changed)
    errors: dict[str, list[str]] = {}
    for name in UPSTREAM_URL_FIELDS.get(transport, ()):
        if values.get(name) and (changed is None or name in changed):
            try:
                validate_upstream_url(values[name])
            except ValidationError as error:
                errors[name] = error.messages
    if errors:
        raise ValidationError(errors)


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
    server_upstream_hosts_check(transport=server.transport, values=vars(server), changed=None)
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
        server_upstream_hosts_check(transport=server.transport, values=vars(server), changed=fields)
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
