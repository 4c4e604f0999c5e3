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


class QueryLogMode(models.TextChoices):
    FULL = "full", "Full text"
    REDACTED = "redacted", "Digits, e-mail addresses and long tokens masked"
    OFF = "off", "Nothing recorded"


class EmptyAnswerReason(models.TextChoices):
    """Why a logged search answered with no tool. Only ``withheld`` is a gap a curator can close; the
    others are the caller's own narrowing or access."""

    WITHHELD = "withheld", "Withheld: no tool fits (the search's rule)"
    FILTERED = "filtered", "Emptied by the caller's filters"
    NOTHING_VISIBLE = "nothing_visible", "Nothing visible to the caller (granted no tool)"


class SearchOutcomeKind(models.TextChoices):
    """What became of a search: the outcome of an execute_tool of a tool that search returned."""

    SUCCESS = "success", "Succeeded"
    UPSTREAM_ERROR = "upstream_error", "Upstream error"
    VALIDATION_ERROR = "validation_error", "Invalid arguments"
    DENIED = "denied", "Denied"
    PENDING_APPROVAL = "pending_approval", "Waiting for approval"


class LearnedStatus(models.TextChoices):
    LEARNED = "learned", "Learned (used in ranking)"
    PROMOTED = "promoted", "Promoted to a curated example request"
    REJECTED = "rejected", "Rejected by a curator (never learned again)"
