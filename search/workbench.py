"""The curator's workbench: requests from the query log that agents did not get a good answer for.

Three kinds of request need a curator: withheld ("no tool fits"), answered with low confidence, and
answered but not followed by any call of a returned tool. Searches that were empty only because of the
caller's own filters or because the caller may see no tool are left out (counted, not listed): no example
request would change them. Similar requests (``search.grouping``: the same words once stopwords, punctuation,
plurals and inflections are folded, or nearly the same) are grouped, newest first, with counts and their distinct
wordings. From each group a curator attaches the request to a tool
as an example request (or a negative query); the tool is reindexed at once, so the next search finds it.
A request no tool should serve is dismissed ("No tool should serve this"): its group, and later requests that would
join it, leave the workbench for that curator's tenant until restored (``DismissedRequest``).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import cached_property

from django import forms
from django.conf import settings
from django.contrib import admin, messages
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count, Exists, Max, OuterRef, Q, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import path, reverse
from django.utils import timezone
from django.utils.html import format_html
from django.utils.http import urlencode

from catalog.admin.history import tool_history_note
from catalog.cachesafe import cache_call
from catalog.models import Server, Tool, ToolExample, ToolNegativeExample
from catalog.services.curation import tool_curation_update
from governance.cache import visibility_version
from governance.selectors import person_shown, servers_shaped_by, servers_visible_to_operator

from .choices import EmptyAnswerReason, SearchOutcomeKind
from .engine.ranking import Confidence
from .grouping import Grouper, group_words, similar, wordings
from .models import DismissedRequest, IndexGeneration, QueryLogEntry, SearchOutcome
from .text import close_tool_ids, tokenize
from .usage import query_log_visible_to

WORKBENCH_PERMISSIONS = ("catalog.change_tool", "search.view_querylogentry")
# How far back the workbench lists requests (and the curator home counts them); the dashboard offers the same window.
WORKBENCH_DAYS = 30
MAX_ENTRIES = 2000  # newest log rows read per page view
MAX_GROUPS = 100
# The curator home's counts of waiting groups are kept this long (seconds): new searches show up within it, while
# a curation change or a change of who sees what shows at once (``_waiting_key``).
WAITING_CACHE_SECONDS = 60
WORDINGS_SHOWN = 4  # a group's distinct wordings listed on its row (with counts), then "and N more"
# Empty answers that are no gap in the catalog: the caller narrowed them away, or may see no tool at all.
NOT_GAPS = (EmptyAnswerReason.FILTERED, EmptyAnswerReason.NOTHING_VISIBLE)


@dataclass
class RequestGroup:
    """Similar requests: the newest wording, how often and why they need attention, the tools returned."""

    key: str
    text: str
    latest: datetime
    count: int = 0
    withheld: int = 0
    low: int = 0
    unfollowed: int = 0
    tool_ids: list[str] = field(default_factory=list)
    returned: list[tuple[str, str]] = field(default_factory=list)  # (tool_id, its admin page or "")
    texts: list[str] = field(default_factory=list)  # every request's words, newest first
    asked: list[tuple[str, datetime, int]] = field(default_factory=list)  # (who, when, pk) of each, newest first
    called: list[FollowingCall] = field(default_factory=list)  # what the agents called next (``_link_called``)

    @cached_property
    def wordings(self) -> list[tuple[str, int]]:
        """Its distinct wordings, most asked first, with how often (the same text in other case or spacing is one)."""
        return wordings(self.texts)

    @property
    def wordings_shown(self) -> list[tuple[str, int]]:
        return self.wordings[:WORDINGS_SHOWN]

    @property
    def wordings_more(self) -> int:
        return max(0, len(self.wordings) - WORDINGS_SHOWN)


@dataclass
class FollowingCall:
    """A tool the agents called after a group's requests (``_link_called``): how often, how those calls ended, and
    the search the query log linked them to when it was a later one (its words), not the group's own request."""

    tool_id: str
    url: str  # the tool's admin page
    curatable: bool  # the reader may attach requests to it (a shared server's tool is a superuser's)
    count: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)  # outcome shown -> how many
    after: str = ""

    @property
    def outcomes_shown(self) -> str:
        return ", ".join(f"{outcome.lower()} ×{count}" for outcome, count in self.outcomes.items())


CALLS_READ_PER_GROUP = 20  # a group's newest requests whose following calls are looked up
REPHRASINGS_READ = 3  # a request's caller's later searches read for the call it led to (``_link_called``)


MAX_ID_DIGITS = 18  # a bigint's ids: 2**63 - 1 has 19 digits


def group_key(text: str) -> str:
    """A request's words (any order, case or punctuation; stopwords ignored): the key its dismissal is stored under
    (``dismissal_key``) and a group's ``key``. Requests are grouped by ``search.grouping``, which folds more."""
    words = sorted(set(tokenize(text)))
    return " ".join(words) or " ".join(text.casefold().split())


def dismissal_key(key: str) -> str:
    """The stored form of a group's key (``DismissedRequest.key``): a fixed-length hash of its words."""
    return hashlib.sha256(key.encode()).hexdigest()


def dismissals_for(user) -> QuerySet[DismissedRequest]:
    """The dismissals that apply to what ``user`` sees: those of the tenants they are a member of; for a curator in
    no tenant (an install without tenants), those made by curators in no tenant; for a superuser, who reads every
    tenant's requests, every dismissal."""
    if getattr(user, "is_superuser", False):
        return DismissedRequest.objects.all()
    tenants = list(user.tenants.values_list("pk", flat=True))
    return DismissedRequest.objects.filter(Q(tenant__in=tenants) if tenants else Q(tenant__isnull=True))


def request_dismiss(*, text: str, user) -> bool:
    """Dismiss ``text``'s group for ``user``'s tenants (``_dismissal_places``): later requests that would join it stay
    out too. Returns False when it already was dismissed for all of them (the first dismissal's who and when are
    kept)."""
    text = " ".join(text.split())[:500]
    added = False
    for tenant, words in _dismissal_places(text, user=user):
        # get_or_create also takes a concurrent curator's dismissal
        _, created = DismissedRequest.objects.get_or_create(
            tenant_id=tenant, key=dismissal_key(group_key(words)), defaults={"text": words, "dismissed_by": user}
        )
        added = added or created
    return added


def _dismissal_places(text: str, *, user) -> list[tuple[int | None, str]]:
    """Where a dismissal of ``text``'s group is kept (None: for the curators in no tenant), and in which words. A
    dismissal's words are read by every curator of its tenant (the dismissed list), so each tenant keeps its own
    (Z12): a group may hold paraphrases of several tenants' requests (a curator in tenants A and B, a superuser),
    and B's wording must not show to A's curators. When a shared request is in the group (or none the workbench
    reads is: the curator's own words), its words are kept in each of ``user``'s tenants; else each tenant whose
    requests are in the group keeps its newest wording, among ``user``'s tenants (every one for a superuser, who
    reads every tenant's requests, so a tenant's request dismissed stays in that tenant, not with the curators in
    no tenant, who read shared requests only)."""
    tenants = list(user.tenants.values_list("pk", flat=True))
    words = group_words(text)
    newest: dict[int | None, str] = {}
    for entry in _gap_entries(days=WORKBENCH_DAYS, user=user):  # newest first
        if similar(group_words(entry.query), words):
            newest.setdefault(entry.tenant_id, " ".join(entry.query.split())[:500])
    if not newest or None in newest:
        return [(tenant, newest.get(None, text)) for tenant in tenants or [None]]
    if tenants:
        return [(tenant, newest[tenant]) for tenant in tenants if tenant in newest]
    return sorted(newest.items())


def request_restore(*, key: str, user, tenant: str | None = None) -> str | None:
    """Undo the dismissal stored as ``key`` for ``user``'s tenants, or only in ``tenant`` when given (a tenant's pk,
    "" for the curators in no tenant: a superuser restores one tenant's dismissal, not every tenant's); returns its
    text, None when there was none (another tenant's dismissal is answered the same way)."""
    dismissals = dismissals_for(user).filter(key=key)
    if tenant is not None:
        # ASCII digits only: str.isdigit() takes "²" and "①", which int() refuses (a 500, redteam37); nor an id past
        # any database integer.
        if tenant and not (tenant.isascii() and tenant.isdigit() and len(tenant) <= MAX_ID_DIGITS):
            return None
        dismissals = dismissals.filter(tenant_id=int(tenant) if tenant else None)
    text = dismissals.values_list("text", flat=True).first()
    dismissals.delete()
    return text


def _recent(*, days: int, user) -> QuerySet[QueryLogEntry]:
    since = timezone.now() - timedelta(days=days)
    logged = query_log_visible_to(user=user) if user is not None else QueryLogEntry.objects.all()
    return logged.filter(created_at__gte=since)


def workbench_left_out(*, days: int = WORKBENCH_DAYS, user=None) -> dict[str, int]:
    """How many empty answers the workbench leaves out, per ``EmptyAnswerReason`` (only those with some)."""
    rows = _recent(days=days, user=user).filter(empty_reason__in=NOT_GAPS)
    counts = dict(rows.values_list("empty_reason").annotate(n=Count("id")).values_list("empty_reason", "n"))
    return {reason: counts[reason] for reason in NOT_GAPS if counts.get(reason)}


def workbench_groups(
    *, days: int = WORKBENCH_DAYS, reason: str = "", user=None, returned: bool = True
) -> list[RequestGroup]:
    """Groups of logged client requests that were withheld, low-confidence or not followed by a call,
    newest first, among the newest ``MAX_ENTRIES`` such requests (the page lists ``MAX_GROUPS`` of them); never
    searches emptied by the caller's filters or access (``workbench_left_out``).
    ``reason`` narrows to one of ``withheld``, ``low``, ``unfollowed``; ``user``: only the requests that
    curator may read (``query_log_visible_to``); ``returned``: collect the tools each group returned (the
    counts alone do not need the logged results)."""
    entries = list(_gap_entries(days=days, user=user, returned=returned))
    dismissals = list(dismissals_for(user).values_list("key", "text")) if user is not None else []
    grouper = Grouper(texts=[*(entry.query for entry in entries), *(text for _key, text in dismissals)])
    dismissed_keys = _seed_dismissals(grouper, dismissals)
    groups: dict[object, RequestGroup] = {}
    for entry in entries:
        kind = _reason(entry)
        if reason and kind != reason:
            continue
        if dismissed_keys and dismissal_key(group_key(entry.query)) in dismissed_keys:
            grouper.mark(entry.query, "dismissed")  # a dismissal whose words are no longer kept: by its key
        cluster = grouper.add(entry.query)
        group = groups.get(cluster)
        if group is None:
            group = RequestGroup(key=group_key(entry.query), text=entry.query, latest=entry.created_at)
            groups[cluster] = group
        group.count += 1
        group.texts.append(entry.query)
        if returned:
            group.asked.append((entry.principal_key, entry.created_at, entry.pk))
        setattr(group, kind, getattr(group, kind) + 1)
        for result in entry.results if returned else ():
            if result.get("tool_id") not in group.tool_ids:
                group.tool_ids.append(result.get("tool_id"))
    return _unhandled([group for cluster, group in groups.items() if not cluster.mark], user=user)


def _seed_dismissals(grouper: Grouper, dismissals: list[tuple[str, str]]) -> set[str]:
    """Mark in ``grouper`` the groups the dismissals (key, text) stand for, first, so that a later paraphrase of a
    dismissed request joins its group and stays out; returns the dismissals' keys, for those whose words are no
    longer kept (``query_log_purge``)."""
    for _key, text in dismissals:
        if text:
            grouper.mark(text, "dismissed")
    return {key for key, _text in dismissals}


def _gap_entries(*, days: int, user, returned: bool = False) -> QuerySet[QueryLogEntry]:
    """The newest ``MAX_ENTRIES`` logged requests ``user`` may read that need a curator (``workbench_groups``)."""
    followed = Exists(SearchOutcome.objects.filter(entry=OuterRef("pk")))
    fields = ("query", "created_at", "confidence", "tenant_id", *(("results", "principal_key") if returned else ()))
    return (
        _recent(days=days, user=user)
        .exclude(empty_reason__in=NOT_GAPS)
        .annotate(followed=followed)
        .filter(Q(confidence__in=[Confidence.NONE, Confidence.LOW]) | Q(followed=False))
        .order_by("-created_at", "-id")
        .only(*fields)[:MAX_ENTRIES]
    )


def workbench_waiting(*, user) -> dict[str, int]:
    """How many groups wait and why (a group may wait for several reasons), as the workbench lists them for
    ``user``: the curator home shows these on every load, so they are kept briefly (``WAITING_CACHE_SECONDS``)
    under the visibility version."""
    key = _waiting_key(user)
    counts = cache_call("get", key) if key is not None else None
    if counts is None:
        # Counted before the page's cut: at volume the first 100 groups were counted, so the home said 100, and 99
        # after one was attached, however many waited.
        groups = workbench_groups(user=user, returned=False)
        counts = {
            "total": len(groups),
            "withheld": sum(1 for group in groups if group.withheld),
            "low": sum(1 for group in groups if group.low),
            "unfollowed": sum(1 for group in groups if group.unfollowed),
        }
        if key is not None:
            cache_call("set", key, counts, timeout=WAITING_CACHE_SECONDS)
    return counts


def _waiting_key(user) -> str | None:
    """None when the cache is down (then computed each time). The visibility version is renewed by every change
    of who sees what and by every tool save, which every curation change makes (``tool_curation_update``: an
    example request or negative query attached from the workbench, the tool form or a promoted learned request).
    A dismissal or restore saves no tool: the key names the count and newest id of the user's dismissals too."""
    version = visibility_version()
    if version is None:
        return None
    stamp = dismissals_for(user).aggregate(n=Count("id"), last=Max("id"))
    return f"scout:workbench:waiting:{version}:{user.pk}:{stamp['n']}:{stamp['last']}"


def _unhandled(groups: list[RequestGroup], *, user) -> list[RequestGroup]:
    """Groups none of whose wordings a curator has attached to a tool yet (as example or negative), among the tools
    ``user`` may curate: another tenant's curators attaching the same words hides nothing here, nor tells which
    words their tools list (Z12). One wording attached handles the group: its paraphrases are the same work."""
    texts = {variant for group in groups for text in group.texts for variant in (text, " ".join(text.split()))}
    examples = ToolExample.objects.filter(text__in=texts)
    negatives = ToolNegativeExample.objects.filter(text__in=texts)
    if user is not None:
        managed = Server.objects.filter(servers_visible_to_operator(user=user)).values("pk")
        examples, negatives = examples.filter(tool__server__in=managed), negatives.filter(tool__server__in=managed)
    handled = set(examples.values_list("text", flat=True)) | set(negatives.values_list("text", flat=True))
    return [group for group in groups if not any(_attached(text, handled) for text in group.texts)]


def _attached(text: str, handled: set[str]) -> bool:
    return text in handled or " ".join(text.split()) in handled


def _link_returned(groups: list[RequestGroup], *, user) -> None:
    """Each returned tool with its page, for the tools of servers ``user`` may manage (another tenant's tool id
    stays plain text, as the log recorded it)."""
    ids = {tool_id for group in groups for tool_id in group.tool_ids}
    managed = Server.objects.filter(servers_visible_to_operator(user=user)).values("pk")
    pks = dict(
        Tool.objects.filter(tool_id__in=ids, removed_at__isnull=True, server__in=managed).values_list("tool_id", "pk")
    )
    for group in groups:
        group.returned = [
            (tool_id, reverse("admin:catalog_tool_change", args=[pks[tool_id]]) if tool_id in pks else "")
            for tool_id in group.tool_ids
        ]


def _link_called(groups: list[RequestGroup], *, user) -> None:
    """What the agents called next after each group's requests: for each request (its group's newest
    ``CALLS_READ_PER_GROUP``), the first call the query log linked to it or to the same caller's (user, token and
    agent) next search, its rephrasing, within SCOUT_QUERY_LINK_WINDOW_SECONDS: a call of a tool the request returned,
    or of one the agent found by asking again in other words (a withheld request returned no tool to link a call to).
    An agent that rephrased more than once (the demo's "keep in mind…", "remember…", then "store a note about a
    person" and the call) is followed up to ``REPHRASINGS_READ`` searches on, to the first that led to a call. A
    rephrasing's call counts only for a tool the request itself returned (a withheld request, which returned none:
    its next search's call): otherwise it is another step of the task ("book a flight", low-confidence with memory
    and git tools, then "show the latest commits" and a git_log call, was credited with it). Only tools of servers
    ``user`` may manage (another tenant's tool is not named, Z12), and searches ``user`` may read."""
    asked = {(key, at, pk) for group in groups for key, at, pk in group.asked[:CALLS_READ_PER_GROUP]}
    if not asked:
        return
    window = timedelta(seconds=settings.SCOUT_QUERY_LINK_WINDOW_SECONDS)
    readable = query_log_visible_to(user=user)
    searches: dict[str, list[tuple[int, str, list]]] = {}  # each caller's searches in the window, oldest first
    for key, pk, query, results in (
        readable.filter(
            principal_key__in={key for key, _, _ in asked},
            created_at__gte=min(at for _, at, _ in asked),
            created_at__lte=max(at for _, at, _ in asked) + window,
        )
        .order_by("created_at", "id")
        .values_list("principal_key", "pk", "query", "results")
    ):
        searches.setdefault(key, []).append((pk, query, results))
    returned: dict[int, set[str]] = {}  # a request's pk -> the tool ids it returned
    rephrased: dict[int, list[tuple[int, str]]] = {}  # a request's pk -> its caller's next searches (pk, words)
    for rows in searches.values():
        for index, (pk, _, results) in enumerate(rows):
            returned[pk] = {result.get("tool_id") for result in results if isinstance(result, dict)}
            rephrased[pk] = [(later, words) for later, words, _ in rows[index + 1 : index + 1 + REPHRASINGS_READ]]
    linked = {pk for _, _, pk in asked} | {later for rows in rephrased.values() for later, _ in rows}
    managed = Server.objects.filter(servers_visible_to_operator(user=user)).values("pk")
    first_call: dict[int, tuple] = {}  # a search's pk -> its first linked call
    for entry_pk, *call in (
        SearchOutcome.objects.filter(entry__in=linked, tool__server__in=managed, tool__removed_at__isnull=True)
        .order_by("created_at", "id")
        .values_list("entry_id", "created_at", "tool_id", "tool__tool_id", "tool__server_id", "outcome")
    ):
        first_call.setdefault(entry_pk, tuple(call))
    shaped = set(Server.objects.filter(servers_shaped_by(user=user)).values_list("pk", flat=True))
    for group in groups:
        followed: dict[str, FollowingCall] = {}
        for _, at, pk in group.asked[:CALLS_READ_PER_GROUP]:
            # Its own call if it had one (a low-confidence answer acted on), else a rephrasing's, in the window.
            chosen, after = first_call.get(pk), ""
            if chosen is None:
                chosen, after = _rephrasings_call(rephrased.get(pk, []), first_call, returned.get(pk, set()))
            if chosen is None or chosen[0] > at + window:
                continue
            _, tool_pk, tool_id, server_pk, outcome = chosen
            call = followed.get(tool_id)
            if call is None:
                url = reverse("admin:catalog_tool_change", args=[tool_pk])
                call = followed[tool_id] = FollowingCall(tool_id=tool_id, url=url, curatable=server_pk in shaped)
            call.count += 1
            shown = SearchOutcomeKind(outcome).label
            call.outcomes[shown] = call.outcomes.get(shown, 0) + 1
            call.after = call.after or after  # in which words the agent found it, when not in this request's
        group.called = sorted(followed.values(), key=lambda call: -call.count)


def _rephrasings_call(later: list[tuple[int, str]], first_call: dict[int, tuple], returned: set[str]):
    """The call the first of the ``later`` searches that led to one led to, and that search's words, if it is of a
    tool the request ``returned``; a withheld request returned none to check: its next search's call, whatever the
    tool. (None, "") when there is none."""
    for hop, (pk, words) in enumerate(later):
        call = first_call.get(pk)
        if call is None:
            continue
        # The first call found decides: a tool the request returned, or (a withheld request returned none) the call
        # that followed its very next search.
        credited = call[2] in returned if returned else hop == 0
        return (call, words) if credited else (None, "")
    return None, ""


def search_then_called(entry: QueryLogEntry, *, user) -> list[FollowingCall]:
    """What the agent called next after one logged search, as the workbench names it (``_link_called``): for the
    search's page in the query log, whose table of returned tools says "not called" of a tool found by rephrasing."""
    alone = RequestGroup(key="", text=entry.query, latest=entry.created_at)
    alone.asked = [(entry.principal_key, entry.created_at, entry.pk)]
    _link_called([alone], user=user)
    return alone.called


def workbench_reason(entry: QueryLogEntry, *, user) -> str:
    """Why the workbench lists this search for ``user`` ("withheld", "low", "unfollowed"), or "" when it does not:
    answered with confidence and followed by a call, emptied by the caller's own filters or access, its words
    already attached to a tool ``user`` may curate, or it (or a paraphrase) dismissed for ``user``'s tenant."""
    if entry.empty_reason in NOT_GAPS:
        return ""
    if entry.confidence not in (Confidence.NONE, Confidence.LOW) and entry.outcomes.exists():
        return ""
    alone = RequestGroup(key="", text=entry.query, latest=entry.created_at, texts=[entry.query])
    if not _unhandled([alone], user=user):
        return ""
    key, words = dismissal_key(group_key(entry.query)), group_words(entry.query)
    for dismissed, text in dismissals_for(user).values_list("key", "text"):
        if dismissed == key or (text and similar(group_words(text), words)):
            return ""
    return _reason(entry)


def _reason(entry: QueryLogEntry) -> str:
    if entry.confidence == Confidence.NONE:
        return "withheld"
    if entry.confidence == Confidence.LOW:
        return "low"
    return "unfollowed"


def request_attach(*, tool: Tool, text: str, negative: bool) -> bool:
    """Add ``text`` to ``tool`` as an example request (or a negative query). Returns False if it was there.
    The tool is reindexed when the transaction commits (``tools_changed``)."""
    model = ToolNegativeExample if negative else ToolExample
    text = " ".join(text.split())[:500]
    with transaction.atomic():
        # Not get_or_create: a tool may already list the phrase twice (the tool form allowed it before it refused
        # repeats), and get() would raise on the pair.
        if model.objects.filter(tool=tool, text=text).exists():
            return False
        model.objects.create(tool=tool, text=text)
        tool_curation_update(tool=tool, phrases_changed=True)
    return True


class AttachForm(forms.Form):
    text = forms.CharField(max_length=500, strip=True)
    tool_id = forms.CharField(max_length=460, strip=True, label="Tool id")
    kind = forms.ChoiceField(choices=[("example", "example request"), ("negative", "negative query")])

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.user = user

    def clean_tool_id(self) -> Tool:
        # Only tools of servers the curator may manage (shared ones and their tenants'): another tenant's tool is
        # answered like a missing one. A shared server's tool, which every tenant searches, is curated only by
        # someone who may shape what every tenant shares (``servers_shaped_by``).
        managed = Server.objects.filter(servers_visible_to_operator(user=self.user))
        tool_id = self.cleaned_data["tool_id"]
        tools = Tool.objects.filter(removed_at__isnull=True, server__in=managed.values("pk"))
        tool = tools.filter(tool_id=tool_id).first()
        if tool is None:
            raise forms.ValidationError(f"no tool “{tool_id}” in the catalog{_did_you_mean(tool_id, tools)}")
        if not Server.objects.filter(servers_shaped_by(user=self.user), pk=tool.server_id).exists():
            raise forms.ValidationError(
                f"“{tool_id}” is on a server every tenant shares: a superuser curates its tools"
            )
        return tool


def _did_you_mean(typed: str, tools: QuerySet[Tool]) -> str:
    """The closest ids among ``tools`` to a mistyped one, or to a tool's name typed without its server, as
    " (did you mean git::git_reset?)"; "" when none is close."""
    close = close_tool_ids(typed, tools.values_list("tool_id", flat=True))
    return f" (did you mean {' or '.join(close)}?)" if close else ""


def _check_permission(request: HttpRequest) -> None:
    if not all(request.user.has_perm(perm) for perm in WORKBENCH_PERMISSIONS):
        raise PermissionDenied


def workbench_view(request: HttpRequest) -> HttpResponse:
    """GET: the groups (``?reason=dismissed``: the dismissed ones); POST: attach a request to a tool, dismiss or
    restore it, then back to the page with what happened."""
    _check_permission(request)
    action = request.POST.get("action", "") if request.method == "POST" else ""
    if action in ("dismiss", "restore"):
        return _dismiss_or_restore(request, action)
    if request.method == "POST":
        form = AttachForm(request.POST, user=request.user)
        if form.is_valid():
            tool, text, negative = (
                form.cleaned_data["tool_id"],
                form.cleaned_data["text"],
                form.cleaned_data["kind"] == "negative",
            )
            before = IndexGeneration.objects.order_by("-id").values_list("pk", flat=True).first()
            added = request_attach(tool=tool, text=text, negative=negative)
            if added:
                note = f"Added {'negative query' if negative else 'example request'} “{text}” from the workbench"
                tool_history_note(user=request.user, tool=tool, message=note)
            after = IndexGeneration.objects.order_by("-id").values_list("pk", flat=True).first()
            what = "a negative query" if negative else "an example request"
            if not added:
                messages.info(request, f"“{text}” already was {what} of {tool.tool_id}.")
            elif after != before:
                messages.success(
                    request,
                    format_html(
                        "Added “{}” as {} of {}. It is searchable now: the index was updated. {}",
                        text, what, tool.tool_id, _check_link(text, tool),
                    ),
                )  # fmt: skip
            else:
                messages.success(
                    request,
                    format_html(
                        "Added “{}” as {} of {}. The index update is queued; it is searchable as soon as a worker "
                        "runs it (usually within a second). {}",
                        text, what, tool.tool_id, _check_link(text, tool),
                    ),
                )  # fmt: skip
            return HttpResponseRedirect(reverse("search_workbench") + _keep_filters(request))
        problems = "; ".join(error for errors in form.errors.values() for error in errors)
        messages.error(request, f"Not added to any tool: {problems}. Your entry is kept below.")
        failed = {name: request.POST.get(name, "") for name in ("text", "tool_id", "kind")}
    else:
        failed = {}
    reason = request.GET.get("reason", "")
    if reason not in ("", "withheld", "low", "unfollowed", "dismissed"):
        reason = ""
    dismissed = _dismissed_rows(request.user)
    waiting = workbench_groups(reason=reason, user=request.user) if reason != "dismissed" else []
    groups = waiting[:MAX_GROUPS]
    _link_returned(groups, user=request.user)
    _link_called(groups, user=request.user)
    context = {
        **admin.site.each_context(request),
        "opts": QueryLogEntry._meta,
        "title": "Search workbench",
        "days": WORKBENCH_DAYS,
        "groups": groups,
        "waiting": len(waiting),
        "left_out": workbench_left_out(user=request.user),
        "reason": reason,
        "dismissed": dismissed,
        "preview_url": reverse("search_preview"),
        "failed": failed,  # the attach that was refused: its row shows what was typed, to correct
    }
    return render(request, "admin/search/workbench.html", context)


def _dismissed_rows(user) -> list[DismissedRequest]:
    """The user's dismissals, newest first, one per key (a curator in several tenants dismissed it in each), each
    with who dismissed it as ``user`` may see them (a curator since moved to another tenant is not named, Z12).
    A superuser, who reads every tenant's, gets one per tenant and key, to restore each where it was made."""
    rows, seen = [], set()
    shown = person_shown(viewer=user, field="dismissed_by", name="dismissed_by__username")
    every_tenant = user.is_superuser
    for row in dismissals_for(user).annotate(dismissed_by_shown=shown).select_related("tenant"):
        where = (row.tenant_id, row.key) if every_tenant else row.key
        if where not in seen:
            seen.add(where)
            rows.append(row)
    return rows


def _dismiss_or_restore(request: HttpRequest, action: str) -> HttpResponse:
    if action == "dismiss":
        text = " ".join(request.POST.get("text", "").split())[:500]
        if not text:
            messages.error(request, "Nothing dismissed: the request's text was missing.")
        elif request_dismiss(text=text, user=request.user):
            messages.success(
                request,
                format_html(
                    "Dismissed “{}”: no tool should serve it. It and later requests like it no longer "
                    'show here or in your home page\'s count. <a id="dismissed-link" href="{}">Dismissed</a> lists '
                    "it, to restore it.",
                    text, reverse("search_workbench") + "?reason=dismissed",
                ),
            )  # fmt: skip
        else:
            messages.info(request, f"“{text}” already was dismissed.")
        return HttpResponseRedirect(reverse("search_workbench") + _keep_filters(request))
    text = request_restore(key=request.POST.get("key", ""), user=request.user, tenant=request.POST.get("tenant"))
    if text is None:
        messages.info(request, "Nothing to restore: that request is not dismissed.")
    else:
        shown = f"“{text}”" if text else "the request (its words were no longer kept)"
        messages.success(
            request,
            f"Restored {shown}: the workbench lists it again while agents' requests with its words are in the "
            f"last {WORKBENCH_DAYS} days.",
        )
    return HttpResponseRedirect(reverse("search_workbench") + "?reason=dismissed")


def _check_link(text: str, tool: Tool) -> str:
    """The attached request in the search preview (among every tool, as the workbench's "try in the preview"), opened
    for the tool: the curator reads at which rank it comes now, its row marked, without typing the request again or
    looking for the tool among ten rows."""
    query = urlencode({"query": text, "top_k": 10, "scope": "every", "tool": tool.pk})
    return format_html(
        '<a id="attached-preview" href="{}?{}">See where {} ranks for it now</a>.',
        reverse("search_preview"),
        query,
        tool.tool_id,
    )


def _keep_filters(request: HttpRequest) -> str:
    reason = request.GET.get("reason", "")
    return f"?reason={reason}" if reason in ("withheld", "low", "unfollowed") else ""


def urls() -> list:
    """Mounted by scoutsite/urls.py before ``admin/`` (admin_view: staff login, CSRF, no cache)."""
    return [path("admin/search/workbench/", admin.site.admin_view(workbench_view), name="search_workbench")]
