"""Search state kept in the database: stored vectors, index generations, fallback events."""

import uuid

import numpy as np
from django.db import models

from .choices import GenerationKind, GenerationStatus, SearchEventKind


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

    class Meta:
        ordering = ["-id"]

    def __str__(self) -> str:
        return f"generation {self.pk} {self.kind} {self.status}"


class SearchEvent(models.Model):
    """A fallback search took (model down, index not ready, ...), so operators see degraded service."""

    kind = models.CharField(max_length=40, choices=SearchEventKind.choices)
    detail = models.TextField(blank=True)
    created_at = models.DateTimeField(auto_now_add=True, db_index=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"{self.created_at:%Y-%m-%d %H:%M:%S} {self.kind}"
