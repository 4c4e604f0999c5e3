"""The retrieval document of a tool: upstream and curated text, rendered once, ORM-free.

``ToolDoc`` is built from a ``catalog.Tool`` (duck-typed, with its server and curation children loaded;
see ``search.selectors.tool_docs_load`` for many at once) or from an eval catalog record, so the app and
``scout_eval`` index exactly the same text.
"""

import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
from django.conf import settings

from catalog.definitions import tool_deprecated
from governance.choices import OperationClass
from governance.classification import classification_derive

from .indexes import ToolSearchIndex
from .text import first_sentence, split_identifier

MAX_PARAMETERS = 40
MAX_ENUM_VALUES = 12


@dataclass(frozen=True)
class ToolDoc:
    """Everything search reads about one tool. ``pk`` is the catalog Tool's primary key."""

    pk: int
    tool_id: str
    name: str
    server: str
    server_name: str = ""
    server_description: str = ""
    title: str = ""
    purpose: str = ""
    description: str = ""
    parameters: tuple[str, ...] = ()
    aliases: tuple[str, ...] = ()
    keywords: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ()
    entities: tuple[str, ...] = ()
    examples: tuple[str, ...] = ()
    negatives: tuple[str, ...] = ()
    # Learned requests (real users' words that led to a successful call) with their weights; dense only,
    # never in BM25 fields or explanations: they are other users' words.
    learned: tuple[tuple[str, float], ...] = ()
    # Weight of one more vector, the centroid of the learned requests' vectors (0: none): ``learned_weight``
    # of the distinct principals who taught the tool, over all its learned requests. Many users' different
    # wordings then count together, as one capped vector, where each wording alone counts as its own
    # principals do. Needs ``MIN_CENTROID_REQUESTS`` learned requests.
    learned_centroid: float = 0.0
    # Who taught each learned request (aligned with ``learned``): opaque teacher keys, never shown, stored or
    # quoted; one teacher's many wordings count as one teacher's in the centroid (``teachers_mean``) and in
    # BM25's agreement (``sparse.learned_tokens``). Empty: not known, each request counts as its own teacher.
    learned_teachers: tuple[tuple[str, ...], ...] = ()
    upstream_deprecated: bool = False  # the upstream's flag (``Tool.upstream_deprecated``)
    # Governance classes it as a read (``ToolPolicy.operation_class``: an admin's, or the upstream's readOnlyHint
    # where the tool's own name and description do not contradict it): ranking reads it as the tool's operation
    # (``intent.tool_operation``) and for confidence (``ranking.answer_confidence``).
    read_only: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def deprecated(self) -> bool:
        """Its upstream marks it deprecated, by flag or in its name, title or description (``tool_deprecated``):
        ranking's ``_apply_deprecated`` puts its replacement first."""
        return tool_deprecated(
            flagged=self.upstream_deprecated, name=self.name, title=self.title, description=self.description
        )

    def field_texts(self) -> dict[str, str]:
        """Text per indexed field (names declared in ``ToolSearchIndex``)."""
        server_label = self.server if self.server_name in ("", self.server) else f"{self.server} {self.server_name}"
        return {
            "name": self.name,
            "name_split": split_identifier(self.name),
            "title": self.title,
            "aliases": "\n".join(self.aliases),
            "server": server_label,
            "server_description": self.server_description,
            "purpose": self.purpose,
            "description": self.description,
            "parameters": "\n".join(self.parameters),
            "keywords": "\n".join(self.keywords),
            "verbs": " ".join(self.verbs),
            "entities": " ".join(self.entities),
            "examples": "\n".join(self.examples),
        }

    def summary_text(self) -> str:
        """The short vector's text: ``name (server): first sentence``."""
        label = self.title or split_identifier(self.name)
        sentence = first_sentence(self.purpose) or first_sentence(self.description)
        return f"{label} ({self.server_name or self.server}): {sentence}".strip()

    def document_text(self) -> str:
        """The full-document vector's text, most telling fields first (the model truncates the tail)."""
        parts = [
            f"{self.title or split_identifier(self.name)} ({self.name}) on {self.server_name or self.server}",
            self.purpose,
            self.description,
            "Parameters: " + "; ".join(self.parameters) if self.parameters else "",
            "Also called: " + ", ".join(self.aliases) if self.aliases else "",
            "Keywords: " + ", ".join(self.keywords + self.verbs + self.entities)
            if self.keywords or self.verbs or self.entities
            else "",
            self.server_description,
        ]
        return "\n".join(p for p in parts if p)[: ToolSearchIndex.dense_document_chars]

    def dense_texts(self) -> list[tuple[str, str]]:
        """(kind, text) per vector: document, summary, then each example request."""
        texts = [("document", self.document_text()), ("summary", self.summary_text())]
        texts += [("passage", passage) for passage in description_passages(self.description)]
        texts += [("example", example) for example in self.examples if example.strip()]
        texts += [("learned", text) for text, _ in self.learned]
        return texts

    def vector_weights(self) -> list[float]:
        """A factor per dense text: 1.0, except learned requests, which count less than curated text (their
        vectors are scaled, so a tool's best-vector score takes the weight into account)."""
        return [1.0] * (len(self.dense_texts()) - len(self.learned)) + [weight for _, weight in self.learned]

    def vector_rows(self, vectors: np.ndarray) -> tuple[np.ndarray, tuple[str, ...], tuple[str, ...]]:
        """The tool's vectors with their kinds and texts, from the dense texts' unit vectors (one row per
        ``dense_texts()``): each scaled by ``vector_weights()``, then the learned centroid, if any, then
        the learned sums (``learned_sums``). Extra rows have kind ``learned`` and no text: explanations
        never quote learned requests."""
        pairs = self.dense_texts()
        kinds, texts = tuple(k for k, _ in pairs), tuple(t for _, t in pairs)
        if not self.learned:
            return vectors, kinds, texts
        rows = vectors * np.asarray(self.vector_weights(), dtype=np.float32)[:, None]
        learned_rows = rows[len(pairs) - len(self.learned) :]
        learned = vectors[len(pairs) - len(self.learned) :]
        if self.learned_centroid > 0 and len(learned) >= MIN_CENTROID_REQUESTS:
            centroid = teachers_mean(learned, self.teachers())
            norm = float(np.linalg.norm(centroid))
            if norm > 0:
                row = (centroid / norm * self.learned_centroid).astype(np.float32)
                rows, kinds, texts = np.vstack([rows, row[None, :]]), (*kinds, "learned"), (*texts, "")
                learned_rows = np.vstack([learned_rows, row[None, :]])
        sums = learned_sums(vectors[[i for i, (kind, _) in enumerate(pairs) if kind in SUMMED_KINDS]], learned_rows)
        kinds, texts = (*kinds, *("learned",) * len(sums)), (*texts, *("",) * len(sums))
        return np.vstack([rows, sums]), kinds, texts

    def teachers(self) -> tuple[tuple[str, ...], ...]:
        """Each learned request's teachers: ``learned_teachers``, or, not known, each request its own."""
        if len(self.learned_teachers) == len(self.learned):
            return self.learned_teachers
        return tuple((f"#{i}",) for i in range(len(self.learned)))

    def learned_indexed(self) -> dict[str, Any]:
        """What ranking reads of the learned requests beside their vectors, as stored with them
        (``ToolEmbedding.learned``): texts and weights, the centroid's weight, and who taught each as ordinals
        in order of first appearance (the same agreement for BM25, and no teacher's key stored)."""
        ordinals: dict[str, int] = {}
        teachers = [[ordinals.setdefault(key, len(ordinals)) for key in keys] for keys in self.learned_teachers]
        requests = [list(pair) for pair in self.learned]
        return {"requests": requests, "teachers": teachers, "centroid": self.learned_centroid}

    def with_learned_indexed(self, stored: Mapping[str, Any]) -> "ToolDoc":
        """This document with the learned requests of ``stored`` (``learned_indexed``) instead of its own."""
        return replace(
            self,
            learned=tuple((str(text), float(weight)) for text, weight in stored["requests"]),
            learned_teachers=tuple(tuple(f"#{ordinal}" for ordinal in keys) for keys in stored["teachers"]),
            learned_centroid=float(stored["centroid"]),
        )

    def dense_hash(self) -> str:
        """Hash of the texts that get vectors (dense texts and negatives): what decides re-encoding."""
        # The centroid's weight only where there is one: a tool never taught keeps the hash (and so the stored
        # vectors) it had before centroids existed, instead of every tool being re-encoded after an upgrade.
        weights = [*self.vector_weights(), *([self.learned_centroid] if self.learned_centroid else [])]
        if self.learned:  # the learned sums' share too (a tool never taught keeps its hash)
            weights.append(LEARNED_OVER_CURATED)
        if self.learned_centroid and len(self.learned) >= MIN_CENTROID_REQUESTS:  # who taught: the centroid
            weights.append(_teachers_digest(self.teachers()))
        payload = json.dumps([self.dense_texts(), list(self.negatives), weights], ensure_ascii=False)
        return hashlib.sha256(payload.encode()).hexdigest()

    def content_hash(self) -> str:
        """Hash of everything the index reads; an unchanged hash means nothing needs re-encoding."""
        payload = json.dumps(
            [self.field_texts(), self.dense_texts(), list(self.negatives)], sort_keys=True, ensure_ascii=False
        )
        return hashlib.sha256(payload.encode()).hexdigest()


MIN_CENTROID_REQUESTS = 2  # one learned request is its own vector already
# A learned request adds to its tool's own match, beyond this share of it (``learned_sums``).
LEARNED_OVER_CURATED = 0.6
SUMMED_KINDS = ("document", "summary")


def learned_weight(principal_count: int) -> float:
    """How much a learned request counts next to a curated example (1.0): it grows with the number of
    distinct principals who confirmed it and is capped, so no single principal can lift a tool far."""
    if principal_count <= 0:
        return 0.0
    base, step = settings.SCOUT_LEARNED_WEIGHT_BASE, settings.SCOUT_LEARNED_WEIGHT_STEP
    return min(settings.SCOUT_LEARNED_WEIGHT_CAP, base + step * (principal_count - 1))


def learned_sums(curated: np.ndarray, learned: np.ndarray) -> np.ndarray:
    """``(1 - LEARNED_OVER_CURATED) * c + l`` for every curated unit vector ``c`` (the document and the
    summary) and every weighted learned vector ``l`` (each request and the centroid), one row each.

    A tool scores by its best vector (max-sim, engine/dense.py), so with these rows a taught tool's score
    is ``max(c, l, c + l - 0.6 c)`` over its cosines: what its best learned request has beyond 0.6 of its
    own match adds to that match instead of only replacing a weaker one. Being vectors, not a scoring rule,
    they are what every backend's max-sim ranks (Weaviate's server-side head included), and a tool never
    taught has none, so its score is bit for bit what it was. A tool both its text and its users' words
    point to now ranks above one only either does; the share keeps users' stylistic closeness (long
    requests alike in wording but about other tools) from lifting every taught tool above untaught ones.
    Cross-validated on queries-metatool-learn only (learn from one half, test on the other, four folds;
    as-served Hit@1 / Hit@5): a plain max (share 1) .629 / .813; a plain sum (0) .649 / .842 but ToolBench
    halves .766 -> .614 Hit@1; 0.5 .645 / .833, 0.6 .647 / .833, 0.7 .646 / .828 with ToolBench unchanged.
    One principal's learned request weighs ``learned_weight(1)`` (0.6): alone it lifts a tool's score by
    at most that much, however many wordings it sends (the best one counts, they never add up).

    Measured and not kept: a kNN vote (one more vector per learned request: it and its two closest fellow
    requests by distinct teachers, a third of the vote's weight each), learning from 3/4 of the learn file
    and tested on the rest, as served: Hit@1 / Hit@5 .681 / .867 without, .675 / .861 with a vote of 1.5,
    .681 / .869 with 0.9. What limits MetaTool's learning is the traffic, not how it is used: only requests
    whose tool was served are learned (71%), and even learning every learn query regardless (an upper bound
    of any replay) gives the test file .748 / .912 (.767 / .914 with the vote).

    Measured again (learn file -> test file, as served Hit@1 / Hit@5: .718 / .885 as above) and not kept: the
    learn file replayed in ten rounds, each round's requests indexed before the next is searched (the batched
    reindex), learns 1,590 requests instead of 1,508 but gives .713 / .877; a request weighted by the distinct
    teachers of its tool's requests within cosine .7 of it (several close requests as stronger evidence; one
    teacher still the base) .716 / .884 (.6: .713 / .880); the centroid at a fixed .6 / 1.0 / 1.2 / 1.5
    instead of its teachers' weight .707 / .871, .720 / .887, .725 / .893, .726 / .895 (above 1.0 a learned
    vector outweighs a curated one); the centroid's sums with a curated share of .2 or 1.0 instead of .4 .718 /
    .881, .704 / .885. What each part of learning gives: without learned words in BM25 .586 / .833, without
    the centroid .703 / .868, without the requests' own vectors and sums (the centroid alone) .714 / .882. Of
    the 493 learn queries not learned, 431 did not rank their tool in the first ten (191 not in the first 30),
    40 were withheld and 22 cut. The ceiling is the traffic's labels, not how they are used: as a
    nearest-neighbour vote the learn queries give the test file .678 / .897 (the top three per tool summed:
    .703 / .892), a logistic regression trained on all 2,000 learn queries and the tools' documents .748 /
    .921, and of the 81 test queries with a learn query at cosine .9 or more, 7 have one labelled with another
    tool (HouseRentingTool / HousePurchasingTool and TripTool / TripAdviceTool have documents at cosine .84).
    Hit@5 .95 on this file is beyond what this traffic teaches this model."""
    if not len(curated) or not len(learned):
        return np.zeros((0, learned.shape[1] if learned.ndim == 2 else 0), np.float32)
    share = np.float32(1.0 - LEARNED_OVER_CURATED)
    sums = share * curated.astype(np.float32)[:, None, :] + learned.astype(np.float32)[None, :, :]
    return sums.reshape(-1, curated.shape[1]).astype(np.float32, copy=False)


def teachers_mean(learned: np.ndarray, teachers: Sequence[Sequence[str]]) -> np.ndarray:
    """The mean over teachers of each teacher's mean learned vector (float64): however many wordings one
    teacher sends, they weigh as one teacher among the tool's teachers, never more."""
    members: dict[str, list[int]] = {}
    for row, who in enumerate(teachers):
        for teacher in who:
            members.setdefault(teacher, []).append(row)
    vectors = learned.astype(np.float64)
    return np.mean([vectors[rows].mean(axis=0) for rows in members.values()], axis=0)


def _teachers_digest(teachers: Sequence[Sequence[str]]) -> str:
    return hashlib.sha256(json.dumps([sorted(t) for t in teachers]).encode()).hexdigest()[:16]


MAX_PASSAGES = 8
MIN_PASSAGE_CHARS = 25


def description_passages(description: str) -> list[str]:
    """Lines of a long description past its first sentence, each its own vector (max-sim finds the one
    line a request is about, instead of one averaged vector over a long text). Read only until MAX_PASSAGES are
    found: each line was compared with every one kept before, so an upstream's description of thousands of lines
    (256 kB, 7,500 lines) took 1.5 s, several times per index build of the tool (T13)."""
    if len(description) < 300:
        return []
    first = first_sentence(description)
    passages: list[str] = []
    for line in description.splitlines():
        line = line.strip(" -*#\t")
        if len(line) >= MIN_PASSAGE_CHARS and line != first and line not in passages:
            passages.append(line[:500])
            if len(passages) == MAX_PASSAGES:
                break
    return passages


# Topic spread (search capture, bench/NOTES-capture.md): a description whose lines each read as a request on another
# topic gets one passage vector per topic, and max-sim serves the tool for all of them. A passage is *lone* when
# its cosine similarity to the summary vector (name and first sentence) is under SPREAD_SUMMARY_SIMILARITY and to
# every other passage under SPREAD_PASSAGE_SIMILARITY. Measured on the public catalogs (5,704 tools; 190 with 2+
# passages, bench/capture.py --screen-catalogs): no honest tool has more than 4 lone passages (desktop-commander's
# get_config and set_config_value); the eight-topic design has 5 under each server name tried. Its variant whose
# first sentence names the eight topics has 0 or 1 and is not held: see the served-share signal (search.capture).
TOPIC_SPREAD = "topic-spread"  # the marker a curator reads on the held tool
SPREAD_SUMMARY_SIMILARITY = 0.2
SPREAD_PASSAGE_SIMILARITY = 0.45
SPREAD_LONE_PASSAGES = 5


def lone_passages(kinds: Sequence[str], vectors: np.ndarray) -> int:
    """How many of a tool's description passages are about something else than its summary and than each other,
    from the vectors computed for indexing (one row per ``kinds`` item, as ``dense_texts``)."""
    passages = [i for i, kind in enumerate(kinds) if kind == "passage"]
    if len(passages) < 2 or "summary" not in kinds:
        return 0
    unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
    lines = unit[passages]
    to_summary = lines @ unit[list(kinds).index("summary")]
    between = lines @ lines.T
    np.fill_diagonal(between, -1.0)
    return int(np.sum((to_summary < SPREAD_SUMMARY_SIMILARITY) & (between.max(axis=1) < SPREAD_PASSAGE_SIMILARITY)))


def topic_spread_held(kinds: Sequence[str], vectors: np.ndarray) -> bool:
    return lone_passages(kinds, vectors) >= SPREAD_LONE_PASSAGES


def render_parameters(schema: object) -> tuple[str, ...]:
    """``name (type, required): description [enum a, b]`` for each top-level property."""
    if not isinstance(schema, Mapping):
        return ()
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return ()
    required = schema.get("required") if isinstance(schema.get("required"), list) else []
    lines = []
    for name, spec in list(properties.items())[:MAX_PARAMETERS]:
        spec = spec if isinstance(spec, Mapping) else {}
        kind = spec.get("type", "any")
        if isinstance(kind, list):
            kind = "|".join(str(k) for k in kind)
        flag = "required" if name in required else "optional"
        line = f"{name} ({kind}, {flag})"
        description = spec.get("description") or spec.get("title") or ""
        if isinstance(description, str) and description.strip():
            line += f": {description.strip()}"
        enum = spec.get("enum")
        if isinstance(enum, list) and enum:
            line += " [enum " + ", ".join(str(v) for v in enum[:MAX_ENUM_VALUES]) + "]"
        lines.append(line)
    return tuple(lines)


def _texts(items: Iterable[Any]) -> tuple[str, ...]:
    return tuple(t for t in (str(getattr(i, "text", i)).strip() for i in items) if t)


def _children(tool: Any, name: str) -> Iterable[Any]:
    """A child relation's rows: the list ``tool_docs_load`` prefetched, else a query."""
    prefetched = getattr(tool, f"prefetched_{name}", None)
    return prefetched if prefetched is not None else getattr(tool, name).all()


def tool_doc_from_tool(tool: Any) -> ToolDoc:
    """Build a ToolDoc from a catalog Tool. Children should be prefetched (``tool_docs_load`` does)."""
    server = tool.server
    learned = _learned(tool)
    return ToolDoc(
        pk=tool.pk,
        tool_id=tool.tool_id,
        name=tool.name,
        server=server.slug,
        server_name=server.name,
        server_description=server.description,
        title=tool.title or tool.upstream_title,
        purpose=tool.purpose,
        description=tool.description,
        parameters=render_parameters(tool.input_schema),
        aliases=_texts(_children(tool, "aliases")),
        keywords=_texts(_children(tool, "keywords")),
        verbs=_texts(tool.operation_verbs or []),
        entities=_texts(tool.entity_types or []),
        examples=_texts(_children(tool, "examples")),
        negatives=_texts(_children(tool, "negative_examples")),
        learned=learned,
        learned_centroid=_learned_centroid(tool, learned),
        learned_teachers=_learned_teachers(tool),
        upstream_deprecated=tool.upstream_deprecated,
        read_only=_governed_read(tool),
    )


def _governed_read(tool: Any) -> bool:
    """Whether the tool's policy classes it as a read (``select_related("policy")`` by ``tool_docs_load``)."""
    policy = getattr(tool, "policy", None)  # a tool without a policy row: not known to read only
    return policy is not None and policy.operation_class == OperationClass.READ


def _learned(tool: Any) -> tuple[tuple[str, float], ...]:
    """Learned requests in use (prefetched by ``tool_docs_load`` as ``learned_in_use``), with their weights."""
    rows = getattr(tool, "learned_in_use", None)
    if rows is None:
        return ()
    return tuple((row.text, learned_weight(row.principal_count)) for row in rows if row.text.strip())


def _learned_teachers(tool: Any) -> tuple[tuple[str, ...], ...]:
    """Each learned request's teachers (``teachers``, set by ``tool_docs_load`` for a tool with several
    learned requests), aligned with ``_learned``; empty when not loaded (each request its own teacher)."""
    rows = [row for row in getattr(tool, "learned_in_use", None) or () if row.text.strip()]
    teachers = tuple(tuple(getattr(row, "teachers", ())) for row in rows)
    return teachers if rows and all(teachers) else ()  # not loaded (a single learned request): each its own


def _learned_centroid(tool: Any, learned: tuple[tuple[str, float], ...]) -> float:
    """The learned centroid's weight: ``learned_weight`` of the distinct principals who taught the tool
    (``learned_principals``, set by ``tool_docs_load``; without it, the most any one learned request has)."""
    if len(learned) < MIN_CENTROID_REQUESTS:
        return 0.0
    principals = getattr(tool, "learned_principals", None)
    if principals is None:
        principals = max(row.principal_count for row in tool.learned_in_use)
    return learned_weight(principals)


def tool_doc_from_record(pk: int, record: Mapping[str, Any], servers: Mapping[str, Mapping[str, Any]]) -> ToolDoc:
    """Build a ToolDoc from an eval catalog line (``{"id", "server", "name", "description", "inputSchema"}``)."""
    server = str(record.get("server", ""))
    meta = servers.get(server, {})
    return ToolDoc(
        pk=pk,
        tool_id=str(record["id"]),
        name=str(record.get("name", "")),
        server=server,
        server_name=str(record.get("server_title") or meta.get("title") or meta.get("name") or server),
        server_description=str(meta.get("description") or meta.get("summary") or ""),
        title=str(record.get("title") or ""),
        description=str(record.get("description") or ""),
        parameters=render_parameters(record.get("inputSchema")),
        upstream_deprecated=record.get("deprecated") is True,
        read_only=_annotated_read(record),
    )


def _annotated_read(record: Mapping[str, Any]) -> bool:
    """An eval record's class as governance would derive it from its annotations (``classification_derive``):
    what ``_governed_read`` reads for a synced tool no admin classified."""
    derived = classification_derive(
        annotations=record.get("annotations"),
        name=str(record.get("name", "")),
        title=str(record.get("title") or ""),
        description=str(record.get("description") or ""),
    )
    return derived.operation_class == OperationClass.READ
