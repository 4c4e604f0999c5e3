"""The usage loop: a query log of clients' searches, the outcome of the calls that followed them, and the
requests learned from successful outcomes (DESIGN.md, "The usage loop").

The gateway (or any other client entry point) calls ``query_log_record`` after a search and
``search_outcome_record`` after an ``execute_tool``; both are single inserts on the request path (learning
adds a few small writes only on a successful, linked call). Curators see the log in the admin's workbench.
"""

from __future__ import annotations

import hashlib
import html
import logging
import re
import threading
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import unquote

import re2
from django.conf import settings
from django.db import IntegrityError, connections, transaction
from django.db.models import Count, F, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce
from django.utils import timezone

from catalog.cachesafe import cache_call
from catalog.models import Tool, ToolExample
from catalog.services.curation import tool_curation_update
from governance.principals import Principal, principal_for_user, principals_for_users
from governance.sanitize import strip_hidden
from governance.selectors import server_tenant_id, tenant_q, tool_pks_visible_to
from governance.selectors.executable import executable_pairs
from governance.writebehind import write_behind, write_behind_flush

from .backends import SearchResult
from .choices import EmptyAnswerReason, LearnedStatus, QueryLogMode, SearchOutcomeKind
from .metrics import SEARCH_SECONDS, SEARCHES
from .models import DismissedRequest, LearnedConfirmation, LearnedRequest, QueryLogEntry, SearchOutcome

logger = logging.getLogger(__name__)

MAX_LEARNED_CHARS = 500
FLUSH_PENDING_KEY = "search:learned-index-flush-pending"
RECOUNT_PENDING_KEY = "search:learned-teachers-recount-pending"
RECOUNT_PENDING_SECONDS = 300
# Masks for the ``redacted`` mode: e-mail addresses, long opaque tokens (keys, ids, hashes), then digits.
# Only from the start of a run: tried at every position of a long run without "@" it was quadratic (4 kB: 0.2 s).
# An address on a one-label host (alice@localhost, bob@intranet) or with a quoted name ("bob smith"@example.com) is
# one too.
_EMAIL_RE = re.compile(r'(?<![\w.+-])(?:"[^"\n]{1,64}"|[\w.+-]+)@[\w-]+(?:\.[\w-]+)*')
# A run of 16+ characters keys, base64 and JWTs are made of; it is a token unless every piece between its
# punctuation reads as a word (lower case, Capitalized or camelCase, a short acronym, a number, "python3").
_TOKEN_RUN_RE = re.compile(r"[A-Za-z0-9_\-+/=.~%]{16,}")
_LONG_RUN_RE = re.compile(r"[A-Za-z0-9_\-]{32,}")
_WORD_RE = re.compile(r"[A-Z]?[a-z]{2,}(?:[A-Z][a-z]{2,})*|[A-Za-z]|[A-Z]{2,8}|\d+|[A-Za-z]{1,12}\d{1,4}")
# A key typed or copied in groups ("sk_live_51H8 xY2k 9QzT", "ghp_x9Kq-2LmZ-vB7t", "ABCD-12EF-GH34-IJ56"): runs of
# 3+ characters split by single spaces or hyphens, each group too short for _TOKEN_RUN_RE (redteam38). RE2: untrusted.
_GROUPED_RUN_RE = re2.compile(r"[A-Za-z0-9_+/=]{3,}(?:[ \-][A-Za-z0-9_+/=]{3,})+")
_LICENSE_GROUP_RE = re.compile(r"[A-Z0-9]{4,8}")
# Secrets whose characters may read as words (redteam57), each masked whole: a link's query and fragment values (where
# signed links, reset codes and magic-link tokens travel; the address and the parameters' names stay), a value after a
# credential's name and ":" or "=" ("api-key: …", "password=…") or after "Bearer" (with a digit or punctuation: "the
# Bearer token" stays), and a key behind a prefix its issuer gives every key (gitleaks' rules: Stripe, OpenAI,
# Anthropic, GitHub, GitLab, Slack, npm, Hugging Face, PyPI, Shopify, DigitalOcean, AWS, Google). RE2: untrusted text.
_URL_RE = re2.compile(r"[A-Za-z][A-Za-z0-9+.\-]*://[^\s<>\"'`]+")
_URL_PARAM_RE = re2.compile(r"([?&#;][^=&#?;\s]*=)[^&#;\s]+")
_NAMED_SECRET_RE = re2.compile(
    r"(?i)(\b(?:api[-_ ]?key|apikey|access[-_ ]?key|secret(?:[-_ ]?key)?|client[-_ ]?secret|private[-_ ]?key"
    r"|(?:access[-_ ]?|auth[-_ ]?|refresh[-_ ]?|api[-_ ]?)?token|password|passwd|pwd|passphrase)\s*[:=]\s*)"
    r"[^\s<&#;][^\s&#;]*"
)
_BEARER_RE = re2.compile(r"(\b[Bb]earer\s+)([A-Za-z0-9_\-.~+/=]*[0-9_\-.~+/=][A-Za-z0-9_\-.~+/=]*)")
_KEY_PREFIX_RE = re2.compile(
    r"\b(?:[spr]k_(?:live|test)_|whsec_|sk-|gh[pousr]_|github_pat_|glpat-|gldt-|glrt-|xox[abposre]-|xapp-|npm_|hf_"
    r"|pypi-|shpat_|shpss_|shpca_|dop_v1_|AKIA|ASIA|AIza|ya29\.)[A-Za-z0-9_\-.]{8,}"
)
# Chinese and Japanese numerals (一三八零零一三八零零零 is a telephone number, 五千 an amount): masked in a
# run of two or more (or beside a digit), since one alone is also an ordinary word ("一下", "a little"). 〇 is a
# numeral already.
_CJK_NUMERALS = "零一二三四五六七八九十百千万萬亿億兆两兩壹贰貳叁參肆伍陆陸柒捌玖拾佰仟"
_CJK_NUMERAL_RUN_RE = re2.compile(rf"(?:[{_CJK_NUMERALS}]|\pN)*[{_CJK_NUMERALS}](?:[{_CJK_NUMERALS}]|\pN)*")


@dataclass(frozen=True)
class LoggedResult:
    """One tool in a search answer, as the log keeps it."""

    tool_id: str
    score: float


def principal_key(principal: Principal) -> str:
    """Who searched and who called, for linking the two: the same user, token and agent. The agent by id: its name
    (up to 200 characters) overflowed the column, and Postgres refused every row of that agent's searches."""
    return f"u{principal.user.pk}|t{principal.token_id}|a{principal.agent_id or ''}"


def teacher_key(principal: Principal) -> str:
    """Who taught a learned request: the person. Their tokens and agents are one teacher, else anyone could mint
    tokens (their own, POST /api/v1/tokens/) until one request carried the weight the cap keeps for many people."""
    return f"u{principal.user.pk}"


def query_redact(text: str) -> str:
    """``text`` with e-mail addresses, long tokens, secrets in links, after a credential's name or behind a key's known
    prefix, and every digit masked (the ``redacted`` log mode). The text is
    first read as a person reads it: invisible characters (zero-width, soft hyphen, bidi controls) dropped, HTML
    character references (``&commat;``, ``&#64;``) and percent-escapes (``%40``) decoded and compatibility forms
    folded (NFKC), so ``alice\u200b@example.com`` or a full-width ``＠`` is masked as ``@`` is, and a numeral of any
    script (``①``, ``➀``, ``❶``, ``፩``) as a digit."""
    text = unquote(html.unescape(_visible(text)))
    # A letter numeral (Ⅻ, ⅳ) before NFKC makes it Latin letters ("XII"), no longer a numeral.
    text = unicodedata.normalize("NFKC", "".join("#" if unicodedata.category(ch) == "Nl" else ch for ch in text))
    text = _URL_RE.sub(lambda url: _URL_PARAM_RE.sub(lambda param: param.group(1) + "<value>", url.group()), text)
    text = _NAMED_SECRET_RE.sub(lambda named: named.group(1) + "<token>", text)
    text = _BEARER_RE.sub(lambda bearer: bearer.group(1) + "<token>", text)
    text = _KEY_PREFIX_RE.sub("<token>", text)
    text = _EMAIL_RE.sub("<email>", _visible(text))
    text = _GROUPED_RUN_RE.sub(_groups_masked, text)
    text = _TOKEN_RUN_RE.sub(_token_masked, text)
    text = _CJK_NUMERAL_RUN_RE.sub(lambda run: "#" * len(run.group()) if len(run.group()) > 1 else run.group(), text)
    return "".join("#" if unicodedata.category(ch)[0] == "N" else ch for ch in text)


def _visible(text: str) -> str:
    """``text`` without what renders as nothing: format characters (zero-width, soft hyphen, bidi controls) and
    controls but tab and newline. Hidden in an address, they kept it from being read as one while its reader saw it
    whole (redteam36)."""
    return "".join(ch for ch in strip_hidden(text) if unicodedata.category(ch) != "Cf")


def _odd_group(group: str) -> bool:
    """A group no word is made of: a piece between its punctuation that does not read as one (``_WORD_RE``)."""
    return any(not _WORD_RE.fullmatch(piece) for piece in re.split(r"[^A-Za-z0-9]+", group) if piece)


def _groups_masked(run: Any) -> str:
    """``run`` (``_GROUPED_RUN_RE``) with each stretch of a key written in groups masked: two or more odd groups in a
    row (``_odd_group``) of 10+ characters, or four or more upper-case groups of 4 to 8 with a digit among them (a
    licence key; "NATO" and "ISO 9001" alone are no key)."""
    parts = re.split(r"([ \-])", run.group())
    groups, separators = parts[::2], parts[1::2]
    masked = [False] * len(groups)
    for licence, test, least, chars in ((False, _odd_group, 2, 10), (True, _LICENSE_GROUP_RE.fullmatch, 4, 16)):
        start = 0
        while start < len(groups):
            end = start
            while end < len(groups) and test(groups[end]):
                end += 1
            stretch = groups[start:end]
            if len(stretch) >= least and len("".join(stretch)) >= chars:
                if not licence or (any(c.isdigit() for c in "".join(stretch)) and any(g.isalpha() for g in stretch)):
                    masked[start:end] = [True] * len(stretch)
            start = end + 1
    pieces: list[str] = []
    for index, group in enumerate(groups):
        if masked[index] and index and masked[index - 1]:
            continue  # one <token> for the stretch, its separators included
        if index:
            pieces.append(separators[index - 1])
        pieces.append("<token>" if masked[index] else group)
    return "".join(pieces)


def _token_masked(run: re.Match[str]) -> str:
    text = run.group()
    pieces = [piece for piece in re.split(r"[^A-Za-z0-9]+", text) if piece]
    if _LONG_RUN_RE.search(text) or not all(_WORD_RE.fullmatch(piece) for piece in pieces):
        return "<token>"
    return text


def _log_mode() -> str:
    mode = getattr(settings, "SCOUT_QUERY_LOG", QueryLogMode.FULL)
    return mode if mode in QueryLogMode.values else QueryLogMode.FULL


def query_log_visible_to(*, user) -> QuerySet[QueryLogEntry]:
    """Logged searches a curator may read (Z12): shared ones and their tenants' (a superuser: all). Other
    tenants' requests are other tenants' words."""
    if getattr(user, "is_superuser", False):
        return QueryLogEntry.objects.all()
    return QueryLogEntry.objects.filter(tenant_q(principal_for_user(user), "tenant"))


@dataclass(frozen=True)
class AskedSearches:
    """What an approver reads of the agent's searches before a call waiting for approval (``approval_request_asked``).

    ``query``: the search the log linked the call to (the one that listed the tool best, ``_linked_entry``), not
    necessarily the last: ``later`` is the agent's last search after it and before the call ("" if none), with
    ``later_count`` such searches and whether the last listed the tool."""

    query: str
    searched_at: Any  # datetime
    later: str = ""
    later_count: int = 0
    later_listed_tool: bool = False


def approval_request_asked(*, approval) -> AskedSearches | None:
    """What the agent was asked when it made the call now waiting for ``approval`` (a governance ApprovalRequest):
    the request of the search the log linked the call to, as the log stored it (a redacted one stays redacted), and
    the agent's last search between that one and the call, if any (the demo's "book a table", linked, was followed by
    a withheld search the approver never read); None when none is linked (the log off, no search before the call) or
    the search was in another tenant than the request (its words are that tenant's, Z12)."""
    linked = SearchOutcome.objects.filter(approval_id=approval.approval_id).select_related("entry").first()
    if linked is None or linked.entry.tenant_id not in (None, approval.tenant_id):
        return None
    entry = linked.entry
    # The same token's searches after the linked one, up to the call, in the linked one's tenant (checked above).
    after = (
        QueryLogEntry.objects.filter(
            principal_key=entry.principal_key, tenant_id=entry.tenant_id, created_at__lte=approval.created_at
        )
        .filter(Q(created_at__gt=entry.created_at) | Q(created_at=entry.created_at, pk__gt=entry.pk))
        .order_by("-created_at", "-id")
    )
    last = after.only("query", "results").first()
    if last is None:
        return AskedSearches(query=entry.query, searched_at=entry.created_at)
    tool_id = approval.tool.tool_id
    return AskedSearches(
        query=entry.query,
        searched_at=entry.created_at,
        later=last.query,
        later_count=after.count(),
        later_listed_tool=any(result.get("tool_id") == tool_id for result in last.results),
    )


def query_log_record(
    *,
    principal: Principal,
    query: str,
    results: Sequence[LoggedResult],
    confidence: str,
    degraded: bool,
    backend: str,
    latency_ms: float,
    client: str = "mcp",
    deferred: bool = False,
    empty_reason: str = "",
) -> QueryLogEntry | None:
    """Record one client search (one INSERT; ``deferred``: queued, inserted in a batch shortly after, see
    governance/writebehind.py). ``empty_reason`` (an ``EmptyAnswerReason``) says why no tool was returned;
    left empty for an empty answer, it is ``withheld``. Returns None when the log is ``off``, and for a principal
    acting across tenants (a session of a person in several): the log is read per tenant, and such a search
    belongs to no one tenant (filed as shared, every tenant's curators would read its words and the other
    tenants' tools it found, Z12); it never teaches either (``learned_request_confirm``)."""
    mode = _log_mode()
    if mode == QueryLogMode.OFF or principal.acts_across_tenants:
        return None
    stored = query_redact(query) if mode == QueryLogMode.REDACTED else query
    # Postgres refuses a NUL in text, and this row is inserted in a batch with other callers' records.
    stored = stored.replace("\x00", "\ufffd")
    if results:
        empty_reason = ""
    elif empty_reason not in EmptyAnswerReason.values:
        empty_reason = EmptyAnswerReason.WITHHELD
    entry = QueryLogEntry(
        user=principal.user,
        token_ref=principal.token_ref,
        principal_key=principal_key(principal),
        tenant_id=principal.tenant_id,
        client=client,
        log_mode=mode,
        query=stored,
        results=[{"tool_id": r.tool_id, "score": round(float(r.score), 4)} for r in results],
        confidence=confidence,
        empty_reason=empty_reason,
        degraded=degraded,
        backend=backend,
        latency_ms=round(latency_ms, 2),
    )
    if deferred:
        write_behind().add(entry)
    else:
        entry.save(force_insert=True)
    return entry


def search_observe(
    *,
    principal: Principal,
    query: str,
    result: SearchResult,
    latency_ms: float,
    client: str = "mcp",
    deferred: bool = False,
    empty_reason: str = "",
) -> QueryLogEntry | None:
    """Count a client's search in the metrics and record it in the query log (as SCOUT_QUERY_LOG says).
    Called by every client entry point (tool_search, the REST API); never by the curator preview.
    ``empty_reason``: why an empty answer was empty (``query_log_record``)."""
    degraded = result.degraded or not result.index_ready
    SEARCHES.labels(confidence=result.confidence.value, degraded=str(degraded).lower(), backend=result.backend).inc()
    SEARCH_SECONDS.observe(latency_ms / 1000)
    return query_log_record(
        principal=principal,
        query=query,
        results=[LoggedResult(tool_id=match.tool_id, score=match.score) for match in result.matches],
        confidence=result.confidence.value,
        degraded=degraded,
        backend=result.backend,
        latency_ms=latency_ms,
        client=client,
        deferred=deferred,
        empty_reason=empty_reason,
    )


def query_log_purge(*, now=None) -> int:
    """Delete log entries (and their outcomes) older than SCOUT_QUERY_LOG_RETENTION_DAYS, the words of the
    learned requests last confirmed before then that no curator promoted (``learned_requests_expire``) and those of
    the workbench dismissals made before then. Returns how many log entries were deleted."""
    cutoff = (now or timezone.now()) - timedelta(days=settings.SCOUT_QUERY_LOG_RETENTION_DAYS)
    deleted, per_model = QueryLogEntry.objects.filter(created_at__lt=cutoff).delete()
    learned_requests_expire(cutoff=cutoff)
    # A dismissal's words are a request copied from the log too: past the retention (from the dismissal) only its
    # key stays, so later requests with those words stay out and it can still be restored.
    DismissedRequest.objects.filter(dismissed_at__lt=cutoff).exclude(text="").update(text="")
    return per_model.get(QueryLogEntry._meta.label, 0)


def learned_requests_expire(*, cutoff) -> int:
    """A learned request's text is users' words, copied from the log: kept no longer than the log keeps them,
    counted from its last confirmation. Past ``cutoff`` a learned request is deleted (its tool reindexed at once,
    so neither its vector nor its words stay in the index) and a rejected one keeps only its key (the text stays
    refused, unreadable). A promoted one is a curator's example now, and stays. Returns how many were deleted."""
    from .services import index_update

    expired = LearnedRequest.objects.filter(status=LearnedStatus.LEARNED, last_seen__lt=cutoff)
    tool_pks = sorted(set(expired.values_list("tool_id", flat=True)))
    _, per_model = expired.delete()
    LearnedRequest.objects.filter(status=LearnedStatus.REJECTED, last_seen__lt=cutoff).exclude(text="").update(text="")
    if tool_pks:
        index_update(tool_pks=tool_pks)
    return per_model.get(LearnedRequest._meta.label, 0)


def learned_requests_forget(*, server_pk: int) -> int:
    """Forget what the tools of the server ``server_pk`` learned: its tenant changed (a superuser gave a shared
    server to a tenant, moved a tenant's to another, or shared it). Learned requests are the words of the callers of
    its former space (``learned_request_confirm``): the curators of its new space must never read them, nor its new
    callers be ranked by them (Z12). A promoted one stays a curated example. The tools are reindexed after commit.
    Returns how many were deleted."""
    from .tasks import reindex_tools

    learned = LearnedRequest.objects.filter(tool__server_id=server_pk)
    tool_pks = sorted(set(learned.values_list("tool_id", flat=True)))
    _, per_model = learned.delete()
    if tool_pks:
        reindex_tools.delay_on_commit(tool_pks)
    return per_model.get(LearnedRequest._meta.label, 0)


def _linked_entry(*, key: str, tool: Tool) -> QueryLogEntry | None:
    """The search by ``key`` within the link window that returned ``tool`` highest, the newest of those, among the
    searches whose call of ``tool`` has not already succeeded (all of them when every one has).

    An agent often searches more than once before it calls: "remember that Ann is my boss" (this tool first),
    then "book a flight to Paris" (the same tool third of five weak matches). The call belongs to the search that
    offered the tool best; the newest search returning it at all would tell the approver the agent was asked to
    book a flight, and teach ranking that request for this tool (an agent that searches for every step of a task
    before it calls did just that). But a search whose call of the tool succeeded was acted on already: "what time
    is it in Tokyo" (get_current_time first), its call, then "the time in New York, and convert it to Berlin"
    (get_current_time second) and a call for New York belongs to the second search, which the highest rank alone
    never linked. A call repeated after its search's success (one search, several calls) still links to it."""
    since = timezone.now() - timedelta(seconds=settings.SCOUT_QUERY_LINK_WINDOW_SECONDS)
    recent = QueryLogEntry.objects.filter(principal_key=key, created_at__gte=since).only("pk", "query", "results")
    returned = []  # (rank of the tool, entry), newest first
    for entry in recent.order_by("-created_at", "-id")[:20]:
        ranks = [rank for rank, result in enumerate(entry.results) if result.get("tool_id") == tool.tool_id]
        if ranks:
            returned.append((ranks[0], entry))
    acted_on = set(
        SearchOutcome.objects.filter(
            entry__in=[entry.pk for _, entry in returned], tool=tool, outcome=SearchOutcomeKind.SUCCESS
        ).values_list("entry_id", flat=True)
    )
    candidates = [(rank, entry) for rank, entry in returned if entry.pk not in acted_on] or returned
    # min keeps the first of equal ranks: the newest.
    return min(candidates, key=lambda pair: pair[0])[1] if candidates else None


def search_outcome_record(
    *, principal: Principal, tool: Tool, outcome: str, approval_id: str = ""
) -> SearchOutcome | None:
    """Link an ``execute_tool`` of ``tool`` to the search by the same token, within the window, that it most likely
    followed (``_linked_entry``), with its outcome (and ``approval_id``, the request a call waiting for approval
    made); a success makes that search's request a learned request for the tool. Returns None when no such search
    was logged."""
    if outcome not in SearchOutcomeKind.values:
        raise ValueError(f"unknown outcome {outcome!r}")
    key = principal_key(principal)
    write_behind_flush()  # this process's queued searches first: the one to link may still be queued
    entry = _linked_entry(key=key, tool=tool)
    if entry is None:
        return None
    linked = SearchOutcome.objects.create(entry=entry, tool=tool, outcome=outcome, approval_id=approval_id)
    if outcome == SearchOutcomeKind.SUCCESS and settings.SCOUT_LEARNING:
        learned_request_confirm(principal=principal, tool=tool, text=entry.query)
    return linked


def learned_normalise(text: str) -> str:
    """A learned request's stored wording: whitespace collapsed, at most MAX_LEARNED_CHARS."""
    return " ".join(text.split())[:MAX_LEARNED_CHARS]


def learned_key(text: str) -> str:
    """The same request in other case or spacing has the same key (one learned request per tool)."""
    return hashlib.sha256(learned_normalise(text).casefold().encode()).hexdigest()


def learned_request_confirm(*, principal: Principal, tool: Tool, text: str) -> LearnedRequest | None:
    """Count one principal's successful call of ``tool`` after asking ``text``.

    Learned only for a tool the principal may see and execute; never for a text a curator rejected for
    this tool; and only within one tenant's space (Z12): a caller of tenant A teaches tenant A's tools, a
    caller without a tenant the shared ones, so no tenant's words ever shape what another tenant is shown.
    A person counts once per request, whichever of their tokens or agents called (``teacher_key``): repeats add
    confirmations, not weight. Returns the learned request,
    or None when nothing was learned."""
    text = learned_normalise(text)
    if not text or tool.pk not in tool_pks_visible_to(principal=principal, permission="execute"):
        return None
    if principal.tenant_id != server_tenant_id(tool.server):
        return None
    now = timezone.now()
    key = learned_key(text)
    teacher = teacher_key(principal)
    if _teacher_allowance_spent(teacher=teacher, tool=tool, key=key):
        return None
    with transaction.atomic():
        learned, _ = LearnedRequest.objects.get_or_create(
            tool=tool, key=key, defaults={"text": text, "first_seen": now, "last_seen": now}
        )
        if learned.status == LearnedStatus.REJECTED:
            return None
        try:
            with transaction.atomic():
                LearnedConfirmation.objects.create(learned=learned, principal_key=teacher)
            new_principal = 1
        except IntegrityError:
            # Confirmed before: a teacher the recount stopped counting (``learned_teachers_recount``) who may execute
            # the tool again (checked above) counts again.
            new_principal = LearnedConfirmation.objects.filter(
                learned=learned, principal_key=teacher, counts=False
            ).update(counts=True)
        LearnedRequest.objects.filter(pk=learned.pk).update(
            confirmations=F("confirmations") + 1, principal_count=F("principal_count") + new_principal, last_seen=now
        )
    learned.refresh_from_db()
    if new_principal:
        # The weight changed (a new principal): the tool's vectors must include it; batched, not per call.
        learned_index_schedule(tool_pks=[tool.pk])
    return learned


def learned_teachers_recount_queue() -> None:
    """Queue one recount (``learned_teachers_recount``) for the visibility changes committed until it starts: a
    transaction that changes many grants, or many at once, queue one task, not one each. The recount runs on a
    worker, not in the request that revoked (it reads every teacher's access: seconds for a large catalog), and
    is queued at once, without a countdown: a revoked teacher's weight stops counting once the worker has run it
    and the reindex it queues (the worker's queue latency; with no broker, before the request returns)."""
    from .tasks import recount_learned_teachers

    # Cache down: queue anyway (a second recount finds nothing to change). The marker expires, so a task lost
    # with the broker's data never stops later changes from queueing theirs.
    if cache_call("add", RECOUNT_PENDING_KEY, 1, timeout=RECOUNT_PENDING_SECONDS, default=True):
        recount_learned_teachers.delay()


def learned_teachers_recount() -> int:
    """Count, for every learned request in use, only the teachers who may execute its tool now: the one rule for
    every way access goes and comes back (issue 8). A grant, entitlement or group membership removed, the tool
    held, disabled or removed, its server archived or moved, the person made inactive or out of the tenant: each
    changes the visibility version (``governance.signals.visibility_changed``), and the next recount judges every
    teacher against the database as it is then. A teacher who lost execute stops counting (their confirmation is
    kept, marked not counting), one who got it back counts again; each request's ``principal_count`` is the
    number that count, so a request left with none leaves the index (its words are kept for the curators until
    ``SCOUT_QUERY_LOG_RETENTION_DAYS`` as any learned request's are). A deleted person's confirmations are deleted
    (nothing to restore), and a request that none is left to confirm with them. The changed tools are reindexed.
    A count found off from its confirmations with none to flip (a confirmation racing a recount) is set again too.
    A fixed number of queries however many teachers (``executable_pairs``); the beat runs it as well (hourly), so a
    recount lost with the broker leaves no count wrong for longer. Returns how many confirmations and counts
    changed."""
    from django.contrib.auth import get_user_model

    from .services import index_update

    cache_call("delete", RECOUNT_PENDING_KEY)  # changes committed from now on queue the next recount
    counting = (
        LearnedConfirmation.objects.filter(learned=OuterRef("pk"), counts=True)
        .order_by()
        .values("learned")
        .annotate(n=Count("pk"))
        .values("n")
    )
    # Counts off from their confirmations with none to flip: a confirmation committed while a recount counted (its
    # count read before it), or anything else that left one wrong. Set again below, from the confirmations.
    drifted = dict(
        LearnedRequest.objects.filter(status=LearnedStatus.LEARNED)
        .annotate(counted=Coalesce(Subquery(counting), 0))
        .exclude(principal_count=F("counted"))
        .values_list("pk", "tool_id")
    )
    rows = list(
        LearnedConfirmation.objects.filter(learned__status=LearnedStatus.LEARNED).values_list(
            "pk", "principal_key", "learned_id", "learned__tool_id", "counts"
        )
    )
    people = get_user_model().objects.in_bulk({pk for pk in (_teacher_pk(row[1]) for row in rows) if pk})
    principals = principals_for_users(people.values())
    asked: dict[str, set[int]] = {}
    for _, key, _, tool, _ in rows:
        asked.setdefault(key, set()).add(tool)
    may = executable_pairs({key: principals.get(_teacher_pk(key) or 0) for key in asked}, asked) if asked else set()
    gone, flips, changed, tool_pks = [], {True: [], False: []}, set(drifted), set(drifted.values())
    for pk, key, learned, tool, counts in rows:
        if _teacher_pk(key) not in people:
            gone.append(pk)
        elif ((key, tool) in may) != counts:
            flips[not counts].append(pk)
        else:
            continue
        changed.add(learned)
        tool_pks.add(tool)
    if not changed:
        return 0
    with transaction.atomic():
        LearnedConfirmation.objects.filter(pk__in=gone).delete()
        for counts, pks in flips.items():
            LearnedConfirmation.objects.filter(pk__in=pks).update(counts=counts)
        LearnedRequest.objects.filter(pk__in=changed).update(principal_count=Coalesce(Subquery(counting), 0))
        LearnedRequest.objects.filter(pk__in=changed, status=LearnedStatus.LEARNED, confirmed_by__isnull=True).delete()
    # Reindexed here, not queued: the weight stops counting when this task ends, not after another one.
    transaction.on_commit(lambda: index_update(tool_pks=sorted(tool_pks)))
    return len(gone) + len(flips[True]) + len(flips[False]) + len(drifted)


def _teacher_pk(key: str) -> int | None:
    """The person of a teacher key (``teacher_key``: "u<pk>"); None for another form, which never counts."""
    return int(key[1:]) if key[:1] == "u" and key[1:].isdigit() else None


def _teacher_allowance_spent(*, teacher: str, tool: Tool, key: str) -> bool:
    """Whether ``teacher`` taught ``tool`` SCOUT_LEARNED_PER_TEACHER requests already and ``key`` would be a new one.
    Each success after a search in new words made a learned request: one person with one tool made rows and index
    vectors without end (each embedded again at every reindex of the tool). Past the allowance they still confirm
    requests that exist (others', or their own)."""
    taught = LearnedConfirmation.objects.filter(principal_key=teacher, learned__tool=tool)
    if taught.count() < settings.SCOUT_LEARNED_PER_TEACHER:
        return False
    return not LearnedRequest.objects.filter(tool=tool, key=key).exists()


def learned_index_schedule(*, tool_pks: Sequence[int]) -> None:
    """Mark tools whose learned requests changed and make sure one batched reindex follows within
    SCOUT_LEARNED_INDEX_INTERVAL seconds: every change in that interval rides on the same reindex."""
    LearnedRequest.objects.filter(tool_id__in=list(tool_pks)).update(indexed=False, pending_since=timezone.now())
    transaction.on_commit(_flush_later)


def _flush_later() -> None:
    from .tasks import flush_learned_index

    interval = settings.SCOUT_LEARNED_INDEX_INTERVAL
    if interval <= 0:
        learned_index_flush()
        return
    # Cache down: schedule anyway (a second flush finds nothing left to do); never fail the request (F4).
    if not cache_call("add", FLUSH_PENDING_KEY, 1, timeout=interval * 2, default=True):
        return  # a flush is already on its way and will take this change too
    if flush_learned_index.app.conf.task_always_eager:
        # No broker (tasks run in this process): a daemon timer here waits out the interval, then runs the flush.
        # Should this process stop first, the next change's flush takes these rows too.
        timer = threading.Timer(interval, _flush_from_timer)
        timer.daemon = True
        timer.start()
        return
    # A broker: the flush is queued now with the interval as its countdown, so it outlives this process (and
    # a broker outage: catalog/outbox.py keeps it with its ETA). The beat's flush_stale_learned_index is the
    # safety net for a flush lost anyway (Redis restarted without persistence).
    _flush_queue(countdown=interval)


def _flush_from_timer() -> None:
    """The timer thread's work: run the flush, then close the connections this thread opened."""
    try:
        _flush_queue()
    finally:
        connections.close_all()  # this thread's connections only (an eager flush used the database)


def _flush_queue(countdown: float | None = None) -> None:
    from .tasks import flush_learned_index

    try:
        flush_learned_index.apply_async(countdown=countdown)
    except Exception:  # noqa: BLE001 - a failed eager flush: the rows stay indexed=False
        cache_call("delete", FLUSH_PENDING_KEY)  # the next change arms another flush
        logger.exception("learned requests: the batched reindex did not run; the next change retries it")


def learned_index_flush() -> int:
    """Reindex every tool with learned requests not yet in the index, in one incremental update.
    Returns the number of tools reindexed.

    A row changed while the reindex runs keeps waiting (its ``pending_since`` is later than this flush's
    start): the flush it armed takes it. A flush that dies half-way marks nothing, so its retry (the task is
    acknowledged late) or the beat's safety net does the work again."""
    from .services import index_update

    cache_call("delete", FLUSH_PENDING_KEY)  # changes from now on arm the next flush
    started = timezone.now()
    waiting = LearnedRequest.objects.filter(indexed=False)
    pending = sorted(set(waiting.values_list("tool_id", flat=True)))
    if not pending:
        return 0
    index_update(tool_pks=pending)
    waiting.filter(Q(pending_since__isnull=True) | Q(pending_since__lte=started), tool_id__in=pending).update(
        indexed=True, pending_since=None
    )
    return len(pending)


def learned_index_flush_stale(*, now=None) -> int:
    """The beat's safety net: flush when some learned request has waited for the index longer than
    SCOUT_LEARNED_INDEX_INTERVAL (its batched flush was lost). Returns the number of tools reindexed."""
    cutoff = (now or timezone.now()) - timedelta(seconds=max(settings.SCOUT_LEARNED_INDEX_INTERVAL, 0))
    stale = LearnedRequest.objects.filter(Q(pending_since__isnull=True) | Q(pending_since__lt=cutoff), indexed=False)
    if not stale.exists():
        return 0
    logger.warning("learned requests waited past SCOUT_LEARNED_INDEX_INTERVAL for the index: flushing them now")
    return learned_index_flush()


def learned_request_promote(*, learned: LearnedRequest, actor) -> LearnedRequest:
    """Copy a learned request to the tool's curated example requests (the curator keeps it from now on)."""
    with transaction.atomic():
        # Its row locked first: of two curators promoting it at once, one copies it and the other finds it promoted
        # (both found no example and each made one).
        locked = LearnedRequest.objects.select_for_update().filter(pk=learned.pk)
        if locked.values_list("status", flat=True).first() == LearnedStatus.PROMOTED:
            learned.refresh_from_db()
            return learned
        if not learned.tool.examples.filter(text=learned.text).exists():
            ToolExample.objects.create(tool=learned.tool, text=learned.text)
        learned.status = LearnedStatus.PROMOTED
        learned.decided_by = actor
        learned.indexed = False
        learned.pending_since = timezone.now()
        learned.save(update_fields=["status", "decided_by", "indexed", "pending_since"])
        tool_curation_update(tool=learned.tool, phrases_changed=True)  # reindexes the tool on commit
    return learned


def learned_request_reject(*, learned: LearnedRequest, actor) -> LearnedRequest:
    """Stop using a learned request; the same text is never learned again for this tool."""
    learned.status = LearnedStatus.REJECTED
    learned.decided_by = actor
    learned.save(update_fields=["status", "decided_by"])
    learned_index_schedule(tool_pks=[learned.tool_id])  # its vector leaves the index with the next flush
    return learned
