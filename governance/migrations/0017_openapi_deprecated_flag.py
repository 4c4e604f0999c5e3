"""OpenAPI tools imported with "(Deprecated) " put before their description (the import of the day before the
flag, ``Tool.upstream_deprecated``) get the flag and their description back as the document wrote it. Their hash
moves with it, and so do their accepted hash and waiting approval requests: the next sync computes that same hash,
so no tool is held for review or loses a pending approval over the change. A tool whose stored hash is not that of
its stored definition is left alone (its next sync decides). Lives in governance because it moves governance rows
along with catalog ones, in one transaction."""

import hashlib
import json

from django.db import migrations
from django.utils import timezone

PREFIX = "(Deprecated) "


def _definition(tool, description: str) -> dict:
    """Tool.upstream_definition() with ``description``, as of this migration."""
    return {
        "name": tool.name,
        "title": tool.upstream_title,
        "description": description,
        "inputSchema": tool.input_schema,
        "outputSchema": tool.output_schema,
        "annotations": tool.annotations,
    }


def _hash(tool, description: str) -> str:
    """catalog.definitions.definition_hash of that definition, as of this migration."""
    text = json.dumps(
        _definition(tool, description), sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    )
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def flag_from_prefix(apps, schema_editor):
    Tool = apps.get_model("catalog", "Tool")
    ToolRevision = apps.get_model("catalog", "ToolRevision")
    ToolPolicy = apps.get_model("governance", "ToolPolicy")
    ApprovalRequest = apps.get_model("governance", "ApprovalRequest")
    now = timezone.now()
    for tool in Tool.objects.filter(server__transport="openapi", description__startswith=PREFIX).iterator():
        old = tool.definition_hash
        if old != _hash(tool, tool.description):
            continue
        tool.description = tool.description[len(PREFIX) :]
        tool.upstream_deprecated = True
        tool.definition_hash = _hash(tool, tool.description)
        tool.save(update_fields=["description", "upstream_deprecated", "definition_hash"])
        ToolRevision.objects.get_or_create(
            tool=tool,
            definition_hash=tool.definition_hash,
            defaults={"definition": _definition(tool, tool.description), "created_at": now},
        )
        ToolPolicy.objects.filter(tool=tool, accepted_hash=old).update(accepted_hash=tool.definition_hash)
        ApprovalRequest.objects.filter(tool=tool, tool_definition_hash=old, status="pending").update(
            tool_definition_hash=tool.definition_hash
        )


class Migration(migrations.Migration):
    dependencies = [
        ("catalog", "0009_tool_upstream_deprecated"),
        ("governance", "0016_audit_approval_ref"),
    ]

    operations = [migrations.RunPython(flag_from_prefix, migrations.RunPython.noop)]
