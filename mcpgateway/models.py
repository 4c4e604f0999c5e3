from django.conf import settings
from django.db import models

from .choices import IdempotencyStatus


class PinnedTool(models.Model):
    """A tool a curator pins beside the meta-tools in ``tools/list``, so the most-used tools need no search.

    A pin never widens access: a caller sees a pinned tool only while it is in that caller's visible set."""

    tool = models.OneToOneField("catalog.Tool", on_delete=models.CASCADE, related_name="gateway_pin")
    position = models.PositiveSmallIntegerField(default=0, help_text="Smaller first")
    note = models.CharField(max_length=300, blank=True, help_text="Why it is pinned")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["position", "id"]
        verbose_name = "pinned tool"

    def __str__(self) -> str:
        return f"pin {self.tool_id}"


class IdempotencyRecord(models.Model):
    """One ``execute_tool`` idempotency key of one principal: the call it named and, once done, its result.

    A re-sent call with the same key and the same arguments gets the stored result without a second
    upstream execution; the same key with other arguments is refused; a concurrent duplicate is refused
    while the first runs (the unique constraint makes exactly one insert win)."""

    principal_key = models.CharField(max_length=300, help_text="user id, agent, tenant and token")
    # The person whose key it is, counted against SCOUT_MCP_MAX_IDEMPOTENCY_KEYS_PER_PERSON (the key space is per
    # token, the cap per person: minting more tokens keeps no more). Null only for a record of a deleted person.
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="+"
    )
    key = models.CharField(max_length=200)
    tool_ref = models.CharField(max_length=460, help_text="server::name")
    arguments_digest = models.CharField(max_length=64)
    status = models.CharField(max_length=20, choices=IdempotencyStatus.choices, default=IdempotencyStatus.RUNNING)
    # JSON text, not a JSONField: Postgres' jsonb reads back a number as its digits (1e308: 309 of them) and its keys
    # reordered, so a repeat answered many times the output cap that its first answer kept under (redteam44).
    result = models.TextField(blank=True, default="", help_text="The CallToolResult returned, as JSON, as sent")
    created_at = models.DateTimeField()
    completed_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(db_index=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["principal_key", "key"], name="uniq_idempotency_key")]
        indexes = [models.Index(fields=["user", "expires_at"], name="idempotency_person_live")]
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.key} ({self.status})"
