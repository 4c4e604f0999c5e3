"""The preset role groups (Curators, Approvers, Operators) and their model permissions."""

from django.apps import apps
from django.contrib.auth.management import create_permissions
from django.contrib.auth.models import Group, Permission
from django.db import transaction

from governance.roles import ROLE_PERMISSIONS


def _permissions(labels: tuple[str, ...]) -> list[Permission]:
    wanted = {tuple(label.split(".", 1)) for label in labels}
    found = [
        permission
        for permission in Permission.objects.select_related("content_type").filter(
            codename__in=[codename for _, codename in wanted]
        )
        if (permission.content_type.app_label, permission.codename) in wanted
    ]
    missing = wanted - {(p.content_type.app_label, p.codename) for p in found}
    if missing:
        raise LookupError(f"unknown permissions: {sorted('.'.join(m) for m in missing)}")
    return found


def roles_ensure() -> dict[str, Group]:
    """Create the role groups if missing and set each one's model permissions to exactly its preset.

    Idempotent; runs after every migrate and flush. A permission an admin added to a role group by hand is
    removed again: the presets are the contract the README documents (make a new group for anything else).
    Raises LookupError when a preset names a permission that does not exist (a renamed model)."""
    # Permissions are created per app after its migrations; a role spans apps, so make sure all exist first.
    for app_config in apps.get_app_configs():
        create_permissions(app_config, verbosity=0)
    groups = {}
    with transaction.atomic():
        for name, labels in ROLE_PERMISSIONS.items():
            group, _ = Group.objects.get_or_create(name=name)
            group.permissions.set(_permissions(labels))
            groups[name] = group
    return groups
