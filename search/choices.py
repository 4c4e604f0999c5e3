from django.db import models


class GenerationKind(models.TextChoices):
    FULL = "full", "Full rebuild"
    INCREMENTAL = "incremental", "Changed tools"


class GenerationStatus(models.TextChoices):
    BUILDING = "building", "Building"
    READY = "ready", "Ready"
    FAILED = "failed", "Failed"


class SearchEventKind(models.TextChoices):
    MODEL_UNAVAILABLE = "model_unavailable", "Embedding model unavailable: BM25 only"
    INDEX_NOT_READY = "index_not_ready", "Index missing or empty: tools listed directly"
    VECTORS_MISSING = "vectors_missing", "Some tools have no vectors: BM25 only for them"
    REINDEX_FAILED = "reindex_failed", "Reindex failed"
