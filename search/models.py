"""Search state kept in the database: stored vectors, index generations, fallback events, and the usage
loop (query log, search outcomes, learned requests)."""

import uuid

import numpy as np
from django.conf import settings
from django.db import models
from django.utils import timezone

from .choices import (
    EmptyAnswerReason,
    GenerationKind,
    GenerationStatus,
    LearnedStatus,
    QueryLogMode,
    SearchEventKind,
    SearchOutcomeKind,
)
from .engine.ranking import Confidence


class ToolEmbedding(models.Model):
    """A tool's vectors for one model, keyed by the hash of the texts they encode.

    An unchanged tool (same ``dense_hash`` under the same model) is never encoded again. Rows are float32,
    ``dim`` wide: first one per ``kinds`` entry (document, summary, examples), then ``negative_count``
    rows for the tool's negative examples.
    """

    tool = models.ForeignKey("catalog.Tool", on_delete=models.CASCADE, related_name="+")
    model_key = models.CharField(max_length=200)
    dense_hash = models.CharField(max_length=64)
    dim = models.PositiveIntegerField()
    kinds = models.JSONField(default=list)
    texts = models.JSONField(default=list)
    negative_count = models.PositiveIntegerField(default=0)
    vectors = models.BinaryField()
    # The learned requests these vectors were made from (``ToolDoc.learned_indexed``): their texts and weights,
    # who taught each as per-tool ordinals (never a teacher's key), the centroid's weight. A snapshot read while
    # newer ones wait for the batched flush ranks the tool with these (``selectors.snapshot_vectors``). Null: a
    # row stored before they were kept.
    learned = models.JSONField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["tool", "model_key"], name="search_embedding_unique_model")]

    def __str__(self) -> str:
        return f"{self.tool_id} @ {self.model_key} ({len(self.kinds)}+{self.negative_count})"

    def matrix(self) -> np.ndarray:
        rows = len(self.kinds) + self.negative_count
        return np.frombuffer(bytes(self.vectors), dtype=np.float32).reshape(rows, self.dim)


class IndexGeneration(models.Model):
    """One published state of the search index. Processes reload when the latest ready token changes."""

    token = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    kind = models.CharField(max_length=20, choices=GenerationKind.choices)
    status = models.CharField(max_length=20, choices=GenerationStatus.choices, default=GenerationStatus.BUILDING)
    model_key = models.CharField(max_length=200, blank=True)
    tool_count = models.PositiveIntegerField(default=0, help_text="tools indexed (changed tools if incremental)")
    encoded = models.PositiveIntegerField(default=0, help_text="tools whose vectors were computed")
    reused = models.PositiveIntegerField(default=0, help_text="tools whose stored vectors were reused")
    degraded = models.BooleanField(default=False, help_text="the model was unavailable: no new vectors")
    error = models.TextField(blank=True)
    started_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # Written while the build runs (throttled), read by the admin's progress poll.
    progress_done = models.PositiveIntegerField(default=0, help_text="texts encoded so far")
    progress_total = models.PositiveIntegerField(default=0, help_text="texts to encode (0: none, or not known yet)")
    # Incremental: the tools it reindexed (changed, added, removed), recorded when it is published, so a
    # process serving an earlier generation updates its snapshot for these tools only. Null: every tool (a
    # full rebuild), or not recorded (yet): such a process rebuilds its snapshot whole.
    tool_pks = models.JSONField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"generation {self.pk} {self.kind} {self.status}"

    @property
    def duration_seconds(self) -> float | None:
        if self.finished_at is None:
            return None
        return (self.finished_at - self.started_at).total_seconds()


class SearchEvent(models.Model):
    """A fallback search took (model down, index not ready, ...), so operators see degraded service."""

    kind = models.CharField(max_length=40, choices=SearchEventKind.choices)
    detail = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.kind}"


class QueryLogEntry(models.Model):
    """One search a client made (``tool_search`` over MCP, or another client entry point; never the curator
    preview): what was asked, what came back, and how sure the answer was. ``query`` is stored as the
    SCOUT_QUERY_LOG mode says (``full`` or ``redacted``); with ``off`` no row is written. Rows older than
    SCOUT_QUERY_LOG_RETENTION_DAYS are purged by a periodic task."""

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    token_ref = models.CharField(max_length=40, blank=True)
    # Who asked, as executions are matched to searches: user, token and agent (one token's searches only).
    principal_key = models.CharField(max_length=200, db_index=True)
    tenant = models.ForeignKey(
        "governance.Tenant",
        null=True,
        blank=True,
        on_delete=models.DO_NOTHING,
        db_constraint=False,
        related_name="+",
        help_text="The tenant the caller acted in: only that tenant's curators read it; empty: shared",
    )
    client = models.CharField(max_length=20, default="mcp")
    log_mode = models.CharField(max_length=10, choices=QueryLogMode.choices)
    query = models.TextField()
    results = models.JSONField(default=list, help_text='[{"tool_id": ..., "score": ...}] in rank order')
    confidence = models.CharField(max_length=10, choices=Confidence.choices())
    empty_reason = models.CharField(
        max_length=20,
        blank=True,
        choices=EmptyAnswerReason.choices,
        help_text="Why no tool was returned; empty: tools were returned (or a row from before this was kept)",
    )
    degraded = models.BooleanField(default=False)
    backend = models.CharField(max_length=20, blank=True)
    latency_ms = models.FloatField(default=0.0)

    class Meta:
        ordering = ["-created_at", "-id"]
        verbose_name = "query log entry"
        verbose_name_plural = "query log"
        indexes = [models.Index(fields=["principal_key", "created_at"], name="search_qlog_principal_time")]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.confidence}: {self.query[:60]}"

    @property
    def withheld(self) -> bool:
        return self.confidence == Confidence.NONE


class SearchOutcome(models.Model):
    """An ``execute_tool`` that followed a search by the same token within SCOUT_QUERY_LINK_WINDOW_SECONDS,
    of a tool that search returned, and how it ended. Insert-only (no read-modify-write per call)."""

    entry = models.ForeignKey(QueryLogEntry, on_delete=models.CASCADE, related_name="outcomes")
    tool = models.ForeignKey("catalog.Tool", on_delete=models.CASCADE, related_name="+")
    outcome = models.CharField(max_length=20, choices=SearchOutcomeKind.choices)
    # The approver's decide page shows the search's request beside the call (search/admin.py ApprovalRequestAdmin).
    approval_id = models.CharField(
        max_length=40, blank=True, db_index=True, help_text="The approval request the call waits for; empty: none"
    )
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.tool_id} {self.outcome}"


class LearnedRequest(models.Model):
    """A request that led to a successful call of ``tool``: real users' words for what the tool does.

    Ranking uses it like a curated example request, with a weight that grows with the number of distinct
    principals who confirmed it (capped), so one principal alone cannot move others' rankings far. Its
    text is another user's words: it is never shown to searchers, only to curators in the admin."""

    tool = models.ForeignKey("catalog.Tool", on_delete=models.CASCADE, related_name="learned_requests")
    text = models.CharField(max_length=500)
    key = models.CharField(max_length=64, help_text="hash of the normalised text")
    status = models.CharField(max_length=10, choices=LearnedStatus.choices, default=LearnedStatus.LEARNED)
    # Named as the curator's list names them (callers, successful calls), not "principal count" / "confirmations".
    confirmations = models.PositiveIntegerField(
        "successful calls", default=0, help_text="Calls of the tool that succeeded after a search in these words."
    )
    principal_count = models.PositiveIntegerField(
        "callers",
        default=0,
        help_text="Distinct people and agents whose calls confirmed it, who may call the tool now.",
    )
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    indexed = models.BooleanField(default=False, help_text="its current weight is in the search index")
    pending_since = models.DateTimeField(
        null=True, blank=True, help_text="when its latest change began waiting for the search index (empty: none)"
    )

    class Meta:
        ordering = ["-principal_count", "-confirmations", "-last_seen"]
        constraints = [models.UniqueConstraint(fields=["tool", "key"], name="search_learned_unique_text")]

    def __str__(self) -> str:
        return self.text[:60]  # breadcrumbs and the admin's history; the tool and counts are on the page


class LearnedConfirmation(models.Model):
    """One principal's confirmation of a learned request (distinct principals are what give it weight)."""

    learned = models.ForeignKey(LearnedRequest, on_delete=models.CASCADE, related_name="confirmed_by")
    principal_key = models.CharField(max_length=200)
    created_at = models.DateTimeField(default=timezone.now)
    counts = models.BooleanField(
        default=True, help_text="the teacher may execute the tool now (search.usage.learned_teachers_recount)"
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["learned", "principal_key"], name="search_learned_unique_principal")
        ]

    def __str__(self) -> str:
        return f"{self.learned_id} by {self.principal_key}"


class DismissedRequest(models.Model):
    """A workbench group a curator marked "No tool should serve this" (a request outside the catalog's purpose, as
    "book a flight" where no travel tool exists): it leaves the workbench and the curator home's count, and later
    requests that would join its group (``search.grouping``; by ``search.workbench.group_key`` once its words are no
    longer kept) stay out; "Restore" deletes the row. Kept per tenant, as the query log is read: a dismissal in
    tenant A changes nothing tenant B's curators see, and each tenant keeps its own wording of the group, which its
    curators may read (``search.workbench._dismissal_places``). Empty tenant: made
    by a curator in no tenant (an install without tenants, or a superuser for a shared request), and seen only by
    such curators (and superusers, who see every dismissal)."""

    tenant = models.ForeignKey("governance.Tenant", null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=64, help_text="hash of the group's normalised words (its workbench key)")
    text = models.CharField(max_length=500, help_text="the wording the curator dismissed")
    dismissed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    dismissed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-dismissed_at", "-id"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "key"], condition=models.Q(tenant__isnull=False), name="search_dismissed_unique"
            ),
            models.UniqueConstraint(
                fields=["key"], condition=models.Q(tenant__isnull=True), name="search_dismissed_unique_shared"
            ),
        ]

    def __str__(self) -> str:
        return self.text[:60]
