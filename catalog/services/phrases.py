"""Curated phrases (aliases, keywords, example requests, negative queries) written as whole lists."""

from django.core.exceptions import ValidationError
from django.db import transaction

from catalog.models import Tool, ToolAlias, ToolExample, ToolKeyword, ToolNegativeExample
from catalog.services.curation import tool_curation_update

PHRASE_MODELS = {
    "aliases": ToolAlias,
    "keywords": ToolKeyword,
    "examples": ToolExample,
    "negative_queries": ToolNegativeExample,
}
MAX_PHRASES = 100
MAX_PHRASE_CHARS = 500


def _clean_phrases(kind: str, texts: list[str]) -> list[str]:
    if not isinstance(texts, list) or len(texts) > MAX_PHRASES:
        raise ValidationError({kind: f"give a list of at most {MAX_PHRASES} phrases"})
    cleaned = []
    for text in texts:
        if not isinstance(text, str) or not text.strip():
            raise ValidationError({kind: "phrases must be non-empty strings"})
        text = " ".join(text.split())
        if len(text) > MAX_PHRASE_CHARS:
            raise ValidationError({kind: f"phrases are at most {MAX_PHRASE_CHARS} characters"})
        cleaned.append(text)
    return list(dict.fromkeys(cleaned))


def tool_phrases_replace(*, tool: Tool, kind: str, texts: list[str]) -> bool:
    """Make ``tool``'s phrases of ``kind`` (a PHRASE_MODELS key) exactly ``texts``, in order. Returns whether
    they changed. Raises ValidationError. The caller reports the change to ``tool_curation_update``."""
    model = PHRASE_MODELS[kind]
    wanted = _clean_phrases(kind, texts)
    current = list(model.objects.filter(tool=tool).order_by("id").values_list("text", flat=True))
    if current == wanted:
        return False
    model.objects.filter(tool=tool).delete()
    model.objects.bulk_create([model(tool=tool, text=text) for text in wanted])
    return True


def tool_curate(
    *,
    tool: Tool,
    title: str | None = None,
    purpose: str | None = None,
    phrases: dict[str, list[str]] | None = None,
) -> bool:
    """Write curation: ``title``/``purpose`` (``None`` = leave) and whole phrase lists by kind (a kind left out is
    left as is). One transaction; the search index is updated once it commits (``tools_changed``). Returns
    whether anything changed. Raises ValidationError."""
    phrases = phrases or {}
    unknown = set(phrases) - set(PHRASE_MODELS)
    if unknown:
        raise ValidationError({kind: "not a phrase list" for kind in sorted(unknown)})
    with transaction.atomic():
        changed = False
        for kind, texts in phrases.items():
            changed = tool_phrases_replace(tool=tool, kind=kind, texts=texts) or changed
        return tool_curation_update(tool=tool, title=title, purpose=purpose, phrases_changed=changed)
