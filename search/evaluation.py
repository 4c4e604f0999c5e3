"""scout_eval's engine: load public catalogs into an isolated in-memory index and score labeled queries.

Nothing here touches the app's database: catalogs become ToolDocs (the same documents and ranking code
the app uses), vectors come from an on-disk cache keyed by model and text hash.
"""

import fcntl
import hashlib
import json
import math
import os
import random
import tempfile
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from .documents import MIN_CENTROID_REQUESTS, ToolDoc, learned_weight, tool_doc_from_record
from .engine.decompose import request_part_spans, request_parts, with_implied_steps
from .engine.ranking import (
    MODES,
    Calibration,
    Confidence,
    Ranking,
    RankingOptions,
    answer_confidence,
    withhold_threshold,
)
from .engine.snapshot import DocVectors, IndexSnapshot
from .services import TOP_K_DEFAULT
from .text import request_terms_kept

HIT_KS = (1, 3, 5, 10)
DEPTH = 10
# Withhold thresholds the trade-off curve is reported at (``withhold_curve``): with the peak and spread fixed,
# the withholding rule compares one number, the best calibrated score, so one run gives every threshold's.
WITHHOLD_CURVE = tuple(round(0.05 * i, 2) for i in range(1, 20))
# The prefix of the groups scored leniently (``evaluate``'s ``equivalents``): "lenient:all", "lenient:etom/2", ...
LENIENT = "lenient:"


class EvalDataError(ValueError):
    """A catalog or query file is missing or malformed."""


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        raise EvalDataError(f"{path}: no such file")
    rows = []
    with path.open(encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as exc:
                    raise EvalDataError(f"{path}:{number}: not JSON ({exc.msg})") from exc
    return rows


def load_catalogs(paths: Sequence[Path]) -> list[ToolDoc]:
    """Tools from every catalog (first occurrence of an id wins), with servers-<src>.jsonl beside them."""
    docs: list[ToolDoc] = []
    seen: set[str] = set()
    for path in paths:
        servers: dict[str, dict] = {}
        server_file = path.with_name(path.name.replace("catalog-", "servers-", 1))
        if server_file != path and server_file.is_file():
            servers = {str(row.get("server")): row for row in read_jsonl(server_file)}
        for record in read_jsonl(path):
            if "id" not in record:
                raise EvalDataError(f"{path}: a line has no 'id'")
            if record["id"] in seen:
                continue
            seen.add(record["id"])
            docs.append(tool_doc_from_record(len(docs) + 1, record, servers))
    return docs


class EmbeddingCache:
    """Vectors on disk under ``<dir>/<model>/``, keyed by sha256 of the text: repeated runs encode nothing.

    Several runs may share one directory: keys and vectors are one file (``CACHE_FILE``), written whole to a temp file
    beside it and moved into place (``os.replace``), so a reader sees one writer's complete cache, never one run's
    keys over another's vectors. Each write first takes in what the others saved meanwhile, under a lock on the
    directory so that no run's work is lost (the lock only orders writers; readers never wait)."""

    CACHE_FILE = "cache.npz"

    def __init__(self, directory: Path, model_key: str, encode: Callable[[list[str]], np.ndarray]) -> None:
        self.dir = directory / "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in model_key)
        self.encode_fn = encode
        self.index: dict[str, int] = {}
        self.matrix = np.zeros((0, 0), np.float32)
        self.encoded = 0
        self._merge(*self._read())

    @staticmethod
    def key(text: str) -> str:
        return hashlib.sha256(text.encode()).hexdigest()

    def vectors(self, texts: Sequence[str]) -> np.ndarray:
        keys = [self.key(t) for t in texts]
        missing = list(dict.fromkeys(k for k in keys if k not in self.index))
        if missing:
            by_key = {k: t for k, t in zip(keys, texts, strict=True)}
            self._merge(missing, self.encode_fn([by_key[k] for k in missing]))
            self.encoded += len(missing)
            self._save()
        if not keys:
            return np.zeros((0, self.matrix.shape[1] if self.matrix.ndim == 2 else 0), np.float32)
        return self.matrix[[self.index[k] for k in keys]]

    def _merge(self, keys: Sequence[str], matrix: np.ndarray) -> None:
        """Add the vectors of ``keys`` not cached yet."""
        new = [i for i, k in enumerate(keys) if k not in self.index]
        if not new or (len(self.matrix) and matrix.shape[1:] != self.matrix.shape[1:]):
            return  # nothing new, or another model's width: never mixed in
        base = len(self.index)
        self.matrix = matrix[new] if not len(self.matrix) else np.vstack([self.matrix, matrix[new]])
        self.index.update({keys[i]: base + n for n, i in enumerate(new)})

    def _read(self) -> tuple[list[str], np.ndarray]:
        """The saved keys and vectors; none when the file is missing or unreadable (then rebuilt as needed)."""
        try:
            with np.load(self.dir / self.CACHE_FILE, allow_pickle=False) as saved:
                keys, matrix = [str(k) for k in saved["keys"]], saved["vectors"]
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile):
            return [], np.zeros((0, 0), np.float32)
        return (keys, matrix) if len(keys) == len(matrix) else ([], np.zeros((0, 0), np.float32))

    def _save(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed, or when the process dies
            self._merge(*self._read())  # another run's vectors saved since: kept, not overwritten
            self._write()

    def _write(self) -> None:
        keys = [""] * len(self.index)
        for k, i in self.index.items():
            keys[i] = k
        fd, tmp = tempfile.mkstemp(dir=self.dir, prefix=".cache-", suffix=".npz")
        try:
            with os.fdopen(fd, "wb") as handle:
                np.savez(handle, keys=np.asarray(keys, dtype="<U64"), vectors=self.matrix)
            os.replace(tmp, self.dir / self.CACHE_FILE)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def doc_vectors(docs: Sequence[ToolDoc], vectors_for: Callable[[list[str]], np.ndarray]) -> dict[int, DocVectors]:
    texts, spans = [], []
    for doc in docs:
        pairs = doc.dense_texts()
        spans.append((len(texts), len(pairs), pairs))
        texts.extend(t for _, t in pairs)
    matrix = vectors_for(texts)
    result = {}
    for doc, (start, count, _pairs) in zip(docs, spans, strict=True):
        negatives = vectors_for(list(doc.negatives)) if doc.negatives else None
        result[doc.pk] = DocVectors(*doc.vector_rows(matrix[start : start + count]), negatives)
    return result


@dataclass
class EvalQuery:
    text: str
    groups: list[list[str]]
    match: str
    subset: str
    source: str

    @property
    def kind(self) -> str:
        if self.match == "none":
            return "none"
        return "single" if len(self.groups) == 1 else "multi"


def load_queries(paths: Sequence[Path], known_ids: set[str]) -> tuple[list[EvalQuery], int]:
    """Queries from every file; a query whose labels are not all in the catalogs is dropped (counted)."""
    queries, dropped = [], 0
    for path in paths:
        source = path.stem.replace("queries-", "")
        for row in read_jsonl(path):
            groups = [list(g) for g in row.get("relevant_groups") or []]
            match = str(row.get("match", "all"))
            if match != "none" and (not groups or any(not set(g) & known_ids for g in groups)):
                dropped += 1
                continue
            subset = str(row.get("subset") or row.get("category") or "-")
            queries.append(EvalQuery(str(row["query"]), groups, match, f"{source}/{subset}", source))
    return queries, dropped


def load_equivalence(paths: Sequence[Path]) -> dict[str, frozenset[str]]:
    """Each tool id's equivalents, itself included, from equivalence-set files (one set a line, its members in
    ``tools``; members in ``unresolved``, not in any catalog, are ignored): the union of every set it is in."""
    equivalents: dict[str, set[str]] = defaultdict(set)
    for path in paths:
        for row in read_jsonl(path):
            tools = row.get("tools")
            if not isinstance(tools, list) or not all(isinstance(tool, str) for tool in tools):
                raise EvalDataError(f"{path}: an equivalence set has no list of 'tools'")
            for tool in tools:
                equivalents[tool].update(tools)
    return {tool: frozenset(members) for tool, members in equivalents.items()}


def widened(query: EvalQuery, equivalents: Mapping[str, frozenset[str]]) -> EvalQuery:
    """``query`` scored leniently: each slot also accepts every tool equivalent to one it accepts."""
    groups = [
        list(dict.fromkeys([*group, *sorted(e for t in group for e in equivalents.get(t, ()))]))
        for group in query.groups
    ]
    return replace(query, groups=groups)


@dataclass
class Tally:
    values: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    counts: dict[str, int] = field(default_factory=lambda: defaultdict(int))

    def add(self, name: str, value: float) -> None:
        self.values[name].append(value)

    def count(self, name: str, by: int = 1) -> None:
        self.counts[name] += by

    def summary(self) -> dict[str, float | int]:
        """Each added figure's mean, and each counted figure's count."""
        return {**{name: float(np.mean(v)) for name, v in self.values.items() if v}, **self.counts}


def _first_hit(query: EvalQuery, ranked_ids: list[str]) -> int | None:
    """The 1-based rank of a single-tool request's first relevant tool within ``DEPTH`` (None: not there)."""
    wanted = set(query.groups[0])
    return next((i for i, tool_id in enumerate(ranked_ids[:DEPTH], start=1) if tool_id in wanted), None)


def score_query(query: EvalQuery, ranked_ids: list[str], abstained: bool, tally: Tally) -> None:
    """Single slot: Hit@k, MRR@10, nDCG@10 (one needed tool, so IDCG is 1); multi: slot recall, all-slots.

    For the ranking figures ``ranked_ids`` is the whole ranking; for the as-served figures it is what the
    caller receives (empty when withheld, so a withheld answer counts as a miss)."""
    top = ranked_ids[:DEPTH]
    if query.kind == "none":
        tally.add("abstention", float(abstained))
        return
    tally.add("false_abstention", float(abstained))
    if query.kind == "single":
        rank = _first_hit(query, top)
        for k in HIT_KS:
            tally.add(f"hit@{k}", float(rank is not None and rank <= k))
        tally.add("mrr@10", 1.0 / rank if rank else 0.0)
        tally.add("ndcg@10", 1.0 / math.log2(rank + 1) if rank else 0.0)
    else:
        found = _slots_found(query, top)
        tally.add("slot_recall@10", sum(found) / len(found))
        tally.add("all_slots@10", float(all(found)))


def _slots_found(query: EvalQuery, top: list[str]) -> list[bool]:
    """Per slot of a multi-step request, whether one of the tools it accepts is in ``top``."""
    return [bool(set(group) & set(top)) for group in query.groups]


def evaluate(
    snapshot: IndexSnapshot,
    queries: Sequence[EvalQuery],
    query_vectors: np.ndarray | None,
    vectors_for: Callable[[list[str]], np.ndarray] | None,
    options: RankingOptions,
    calibration: Calibration = Calibration(),  # noqa: B008 - frozen, shared default
    modes: Iterable[str] = MODES,
    progress: Callable[[int, int], None] | None = None,
    parts_for: Callable[[list[str]], list[np.ndarray]] | None = None,
    equivalents: Mapping[str, frozenset[str]] | None = None,
) -> dict[str, dict[str, dict[str, float]]]:
    """{group: {mode: {metric: value, "served": {metric: value}, "withhold_curve": [...]}}} with groups
    "all", each source and each source/subset. The mode's own figures score the whole ranking; ``served``
    scores what a caller gets for ``top_k`` = 10: nothing when the answer is withheld, else the ranking after
    the dynamic cut, plus ``low_confidence``, the share of answers served with low confidence, and the
    confidence's calibration (``score_served``: answers served high / low / withheld, Hit@1 and Hit@5 of each).
    ``withhold_curve``: per threshold of ``WITHHOLD_CURVE`` (with ``options``' peak and spread), the shares of
    answerable and of no-tool requests that threshold would withhold (see ``withhold_curve``).
    ``progress(done, total)`` counts the queries evaluated. ``parts_for(requests)``, when given, gives each
    request's part vectors (one pass over the request: ``one_pass_parts``) instead of ``vectors_for`` on the
    parts' texts. ``equivalents`` (``load_equivalence``), when given, adds each group scored leniently as
    ``LENIENT`` + group, without the withhold curve: the same answers, where a tool equivalent to a relevant one
    counts as relevant (``widened``; its counts add ``widened``, the requests whose labels it widened)."""
    modes = list(modes)
    tallies: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
    served: dict[str, dict[str, Tally]] = defaultdict(lambda: defaultdict(Tally))
    bests: dict[str, dict[str, list[tuple[bool, float]]]] = defaultdict(lambda: defaultdict(list))
    counts: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    visible = snapshot.visible_mask(None)
    all_parts = [request_parts(q.text) for q in queries]
    texts = [q.text for q in queries]
    part_vectors = _part_vectors(texts, all_parts, vectors_for, parts_for)
    alone = _part_vectors(texts, all_parts, vectors_for, None) if parts_for is not None else None
    for i, query in enumerate(queries):
        lenient = widened(query, equivalents) if equivalents is not None else None
        with request_terms_kept():  # its texts tokenized once across the modes
            vector = query_vectors[i] if query_vectors is not None else None
            parts, retry = served_parts(
                query.text, vector, all_parts[i], part_vectors[i] if part_vectors else None, alone, i, vectors_for
            )
            branches = snapshot.branches(query.text, vector, visible)
            for mode in modes:
                if mode != "bm25" and vector is None:
                    continue
                ranking = _rank_served(
                    snapshot,
                    branches,
                    query.text,
                    vector,
                    # The cut only truncates the ordered candidates: one call gives the ranking and the answer.
                    _with(options, fusion=mode, dynamic_cut=True, enforce_abstention=True),
                    calibration,
                    parts,
                    retry,
                )
                ids = [snapshot.docs[c.row].tool_id for c in ranking.candidates]
                best = max((c.calibrated for c in ranking.candidates), default=0.0)  # what the rule compares
                rule = answer_confidence(0.0, ranking.peak, options, ranking.spread, ranking.unread)
                stands_out = rule is not Confidence.NONE  # served at any threshold
                # Where the flat threshold applies, it stays as far above the curve's threshold as above the base.
                best -= withhold_threshold(options, ranking.spread) - options.withhold_threshold
                for group in ("all", query.source, query.subset):
                    score_query(query, ids, ranking.abstained, tallies[group][mode])
                    score_served(query, ranking, ids, served[group][mode])
                    bests[group][mode].append((query.kind == "none", math.inf if stands_out else best))
                    if lenient is not None:
                        score_query(lenient, ids, ranking.abstained, tallies[LENIENT + group][mode])
                        score_served(lenient, ranking, ids, served[LENIENT + group][mode])
            for group in ("all", query.source, query.subset):
                counts[group][query.kind] += 1
                if lenient is not None:
                    counts[LENIENT + group][query.kind] += 1
                    counts[LENIENT + group]["widened"] += int(lenient.groups != query.groups)
            if progress is not None:
                progress(i + 1, len(queries))
    return {
        group: {
            "counts": dict(counts[group]),
            **{
                m: {
                    **tallies[group][m].summary(),
                    "served": served[group][m].summary(),
                    **({} if group.startswith(LENIENT) else {"withhold_curve": withhold_curve(bests[group][m])}),
                }
                for m in modes
                if m in tallies[group]
            },
        }
        for group in sorted(tallies, key=_group_order)
    }


def _group_order(group: str) -> tuple:
    """ "all" first, then each source, then each subset; the lenient groups after the strict ones, alike."""
    name = group.removeprefix(LENIENT)
    return (name != group, name != "all", "/" in name, name)


def withhold_curve(bests: Sequence[tuple[bool, float]]) -> list[dict[str, float | None]]:
    """The withholding trade-off from each request's (``no_tool``, best calibrated score) pair, the score
    infinite where the request's peak or spread alone keeps it served (where the flat threshold applies, the
    score less its distance above the base threshold): per threshold, the share of answerable requests it
    withholds (``false_withholding``) and of no-tool requests (``no_tool_withheld``); None where the group
    has no such request. The rule withholds below the threshold (``ranking.answer_confidence``); the rest of
    the answer does not depend on it."""
    answerable = np.asarray([score for no_tool, score in bests if not no_tool])
    no_tool = np.asarray([score for is_none, score in bests if is_none])
    return [
        {
            "threshold": threshold,
            "false_withholding": float((answerable < threshold).mean()) if len(answerable) else None,
            "no_tool_withheld": float((no_tool < threshold).mean()) if len(no_tool) else None,
        }
        for threshold in WITHHOLD_CURVE
    ]


def learn_replay(
    snapshot: IndexSnapshot,
    queries: Sequence[EvalQuery],
    vectors_for: Callable[[list[str]], np.ndarray] | None,
    options: RankingOptions,
    calibration: Calibration = Calibration(),  # noqa: B008 - frozen, shared default
    parts_for: Callable[[list[str]], list[np.ndarray]] | None = None,
) -> dict[int, dict[str, Any]]:
    """Replay labelled queries as real traffic, before an evaluation: each one a search by a distinct
    principal followed by a successful call of its first relevant tool. As in the gateway, the call is linked
    (and its request learned) only when the served answer returned that tool, and the answer is the one an agent
    gets from ``tool_search`` by default (``TOP_K_DEFAULT`` tools, not the evaluation's ``DEPTH``: a tool ranked
    below them was never shown, so never called from that search); learned requests are keyed, counted once per
    principal and weighted as the app weighs them (``usage.learned_key``, ``documents.learned_weight``).
    Returns, per learning tool's pk, its ToolDoc fields: ``learned`` (the learned requests with their
    weights) and ``learned_centroid`` (the weight of the distinct principals who taught it, as
    ``search.selectors.tool_docs_load`` gives it)."""
    from .usage import learned_key, learned_normalise

    by_id = {doc.tool_id: doc for doc in snapshot.docs}
    visible = snapshot.visible_mask(None)
    learning = [q for q in queries if q.kind != "none"]
    all_parts = [request_parts(q.text) for q in learning]
    texts = [q.text for q in learning]
    vectors = vectors_for(texts) if vectors_for is not None and texts else None
    part_vectors = _part_vectors(texts, all_parts, vectors_for, parts_for)
    alone = _part_vectors(texts, all_parts, vectors_for, None) if parts_for is not None else None
    principals: dict[tuple[int, str], set[str]] = defaultdict(set)
    wording: dict[tuple[int, str], str] = {}
    for i, query in enumerate(learning):
        vector = vectors[i] if vectors is not None else None
        parts, retry = served_parts(
            query.text, vector, all_parts[i], part_vectors[i] if part_vectors else None, alone, i, vectors_for
        )
        ranking = _rank_served(
            snapshot,
            snapshot.branches(query.text, vector, visible),
            query.text,
            vector,
            _with(options, dynamic_cut=True, enforce_abstention=True),
            calibration,
            parts,
            retry,
            top_k=TOP_K_DEFAULT,
        )
        served = [] if ranking.abstained else [snapshot.docs[c.row].tool_id for c in ranking.candidates][: ranking.cut]
        tool_id = query.groups[0][0]
        if tool_id not in served or tool_id not in by_id:
            continue
        text = learned_normalise(query.text)
        key = (by_id[tool_id].pk, learned_key(text))
        principals[key].add(f"learn-{i}")
        wording.setdefault(key, text)
    learned: dict[int, list[tuple[str, float]]] = defaultdict(list)
    teachers: dict[int, list[tuple[str, ...]]] = defaultdict(list)
    taught: dict[int, set[str]] = defaultdict(set)
    for key, who in principals.items():
        learned[key[0]].append((wording[key], learned_weight(len(who))))
        teachers[key[0]].append(tuple(sorted(who)))
        taught[key[0]] |= who
    return {
        pk: {
            "learned": tuple(items),
            "learned_teachers": tuple(teachers[pk]),
            "learned_centroid": learned_weight(len(taught[pk])) if len(items) >= MIN_CENTROID_REQUESTS else 0.0,
        }
        for pk, items in learned.items()
    }


def _rank_served(snapshot, branches, query, vector, options, calibration, parts, retry, top_k=DEPTH) -> Ranking:
    """The ranking ``tool_search`` serves for ``top_k``: with one-pass part vectors, an answer that would be
    withheld is ranked again with the parts encoded alone (``retry``), as search.services.tool_search does."""

    def rank(with_parts):
        return snapshot.rank(
            branches,
            query=query,
            query_vector=vector,
            top_k=top_k,
            options=options,
            calibration=calibration,
            parts=with_parts,
        )

    ranking = rank(parts)
    if retry and vector is not None and ranking.confidence is Confidence.NONE:
        ranking = rank(retry)
    return ranking


def served_parts(
    text: str,
    vector: np.ndarray | None,
    own: list[str],
    own_vectors: np.ndarray | None,
    alone: list[np.ndarray] | None,
    i: int,
    vectors_for: Callable[[list[str]], np.ndarray] | None,
) -> tuple[list, list | None]:
    """The parts and the retry's parts ``_rank_served`` takes for request ``i``, as search.services.tool_search
    builds them: its steps ``own`` (with ``own_vectors``; the retry's encoded alone, ``alone[i]``, when given)
    and the steps it implies (``with_implied_steps``)."""
    parts = [(part, own_vectors[j] if own_vectors is not None else None) for j, part in enumerate(own)]
    retry = [(part, alone[i][j]) for j, part in enumerate(own)] if alone else None
    if vectors_for is not None:
        parts = with_implied_steps(text, vector, parts, vectors_for)
        retry = with_implied_steps(text, vector, retry, vectors_for) if retry is not None else None
    return parts, retry


def _part_vectors(
    texts: list[str],
    all_parts: list[list[str]],
    vectors_for: Callable[[list[str]], np.ndarray] | None,
    parts_for: Callable[[list[str]], list[np.ndarray]] | None,
) -> list[np.ndarray] | None:
    """Each request's part vectors (one row per part), or None without a model."""
    if vectors_for is None or not any(all_parts):
        return None
    if parts_for is not None:
        return parts_for(texts)
    flat = vectors_for([p for parts in all_parts for p in parts])
    result, offset = [], 0
    for parts in all_parts:
        result.append(flat[offset : offset + len(parts)])
        offset += len(parts)
    return result


def one_pass_parts(encoder, texts: list[str], chunk: int = 64) -> list[np.ndarray]:
    """Each request's part vectors from one model pass over the request, as a search gets them with
    SCOUT_SEARCH_ONE_PASS_PARTS (``Encoder.encode_requests``)."""
    result: list[np.ndarray] = []
    for start in range(0, len(texts), chunk):
        requests = [(text, tuple(request_part_spans(text))) for text in texts[start : start + chunk]]
        result += [vectors[1:] for vectors in encoder.encode_requests(requests)]
    return result


# How an answer was served, as the calibration figures name it (``score_served``).
SERVED_AS = {Confidence.HIGH: "high", Confidence.LOW: "low", Confidence.NONE: "withheld"}
CALIBRATION_KS = (1, 5)


def score_served(query: EvalQuery, ranking: Ranking, ranked_ids: list[str], tally: Tally) -> None:
    """The as-served figures: the same metrics over what the caller receives (nothing when withheld), and the
    calibration of its confidence: how many answers were served ``answers_high``, ``answers_low`` and
    ``answers_withheld``, and Hit@1 and Hit@5 among the answers served high (``high_hit@1``, ...) and among
    those served low (``low_hit@1``, ...): how far an agent may trust ``high``. Those hit figures count
    single-tool requests and no-tool requests (an answer served to a request no tool fits is a miss: the demo's
    "send an email to my boss" answered high with memory tools); multi-step requests have no one right tool.
    ``_score_label`` adds the same calibration among answerable requests alone.

    And the trade-off a rule moving answers between high and low makes (``_score_precision``): the precision
    and recall of each label on the first served tool."""
    served = ranked_ids[: ranking.cut]
    score_query(query, served, ranking.abstained, tally)
    tally.add("low_confidence", float(ranking.confidence is Confidence.LOW))
    served_as = SERVED_AS[ranking.confidence]
    for label in SERVED_AS.values():
        tally.count(f"answers_{label}", int(label == served_as))
        for kind in ("single", "multi", "none"):
            tally.count(f"answers_{label}_{kind}", int(label == served_as and query.kind == kind))
    _score_label(query, ranking, ranked_ids, served, tally)
    if ranking.abstained or query.kind == "multi":
        return
    rank = _first_hit(query, served) if query.kind == "single" else None
    for k in CALIBRATION_KS:
        tally.add(f"{served_as}_hit@{k}", float(rank is not None and rank <= k))
    _score_precision(served_as, rank == 1, tally)


def _score_precision(served_as: str, right: bool, tally: Tally) -> None:
    """For an answer served ``high`` or ``low`` to a single-tool or no-tool request, whether its first tool is
    ``right`` (a no-tool request's never is). ``high_precision``: the share of the answers served high whose first
    tool is right (the same number as ``high_hit@1``, named for the trade-off); ``high_recall``: the share of the
    answers whose first tool is right that were served high (a right first tool served low costs an agent a schema
    check). ``low_precision`` and ``low_recall`` alike; the two recalls add up to 1. A rule that moves answers
    from high to low changes these four and no served hit figure (nothing is withheld)."""
    tally.add(f"{served_as}_precision", float(right))
    if right:
        for label in ("high", "low"):
            tally.add(f"{label}_recall", float(served_as == label))


def _score_label(query: EvalQuery, ranking: Ranking, ranked_ids: list[str], served: list[str], tally: Tally) -> None:
    """The calibration among answerable requests only: Hit@1 and Hit@5 of single-tool requests served high
    (``high_single_hit@1``, ...) and low, slot recall of multi-step ones (``high_slot_recall@10``, ...), and for
    those withheld the Hit@1 and Hit@5 of the ranking the caller was not given (``withheld_ranked_hit@1``, ...):
    how many right answers withholding costs. ``answers_<label>_<kind>`` count the requests of each kind."""
    if query.kind == "multi" and not ranking.abstained:
        found = _slots_found(query, served[:DEPTH])
        tally.add(f"{SERVED_AS[ranking.confidence]}_slot_recall@10", sum(found) / len(found))
    if query.kind != "single":
        return
    rank = _first_hit(query, ranked_ids if ranking.abstained else served)
    name = "withheld_ranked" if ranking.abstained else f"{SERVED_AS[ranking.confidence]}_single"
    for k in CALIBRATION_KS:
        tally.add(f"{name}_hit@{k}", float(rank is not None and rank <= k))


def _with(options: RankingOptions, **changes: Any) -> RankingOptions:
    return replace(options, **changes)


def sample_queries(queries: list[EvalQuery], sample: int | None, seed: int, limit: int | None) -> list[EvalQuery]:
    if sample is not None and sample < len(queries):
        queries = random.Random(seed).sample(queries, sample)
    if limit is not None:
        queries = queries[:limit]
    return queries
