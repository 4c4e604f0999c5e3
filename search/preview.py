"""Curator preview: run a request as the gateway would and show how every tool ranks, and why.

Reads only; it ranks with ``search.services.tool_search``, the same ranking step the gateway's
``search_for_principal`` uses (same backend, same visibility rule, same confidence), so what a curator sees
here is what an agent gets; the withheld or cut part of the ranking is shown too, marked as such.
Rendering escapes every string that came from an upstream server (descriptions, names, example text):
templates never mark anything safe.
"""

from collections.abc import Collection
from dataclasses import dataclass, field

from django import forms
from django.conf import settings
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, render
from django.urls import path, reverse

from catalog.models import Server, Tool
from governance.principals import principal_for_user
from governance.selectors import (
    servers_visible_to_operator,
    tool_pks_visible_to,
    tools_servable,
    users_visible_to_operator,
)

from .backends import Match, SearchResult
from .models import IndexGeneration
from .selectors import indexable_tools
from .services import TOP_K_MAX, TOP_K_MIN, SearchQueryError, tool_search, vector_cache_scope
from .text import function_word, tokenize

PREVIEW_PERMISSION = "catalog.view_tool"  # who may preview: anyone who may read the catalog in the admin
AS_USER_PERMISSION = "auth.view_user"  # previewing as someone else reveals what they see


AS_USER, EVERY_TOOL = "user", "every"


class PreviewForm(forms.Form):
    query = forms.CharField(
        max_length=settings.SCOUT_SEARCH_MAX_QUERY_CHARS,
        strip=True,
        widget=forms.TextInput(attrs={"size": 80}),
        label="Request",
        help_text="What an agent would send to tool_search, in a user's words.",
    )
    top_k = forms.IntegerField(
        min_value=TOP_K_MIN,
        max_value=TOP_K_MAX,
        initial=10,
        required=False,
        label="Tools listed",
        help_text=f"How many tools to return, {TOP_K_MIN} to {TOP_K_MAX} (an agent's top_k).",
    )
    fusion = forms.ChoiceField(
        choices=[("", "configured default"), ("convex", "convex"), ("rrf", "RRF")],
        required=False,
        help_text="How word and meaning scores combine; leave the default to see what agents get.",
    )
    scope = forms.ChoiceField(
        choices=[
            (AS_USER, "As a user: the tools this user's MCP client may discover"),
            (EVERY_TOOL, "Every tool some client may get (grants ignored; held, disabled, archived never listed)"),
        ],
        initial=AS_USER,
        required=False,
        widget=forms.RadioSelect,
        label="Rank among",
    )
    as_user = forms.CharField(
        required=False,
        max_length=150,
        label="User",
        help_text="Username whose view to preview. Empty: yourself.",
    )

    def __init__(self, *args, viewer: AbstractBaseUser | None = None, may_choose_user: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.viewer = viewer
        if not may_choose_user:
            del self.fields["as_user"]

    def clean(self) -> dict:
        cleaned = super().clean()
        if cleaned.get("as_user") is not None:  # a user typed in means their view, whichever scope is ticked
            cleaned["scope"] = AS_USER
        return cleaned

    def clean_as_user(self) -> AbstractBaseUser | None:
        username = self.cleaned_data.get("as_user") or ""
        if not username:
            return None
        user = people_visible_to(self.viewer).filter(username=username).first()
        if user is None:
            raise forms.ValidationError("No such user.")
        return user


def people_visible_to(viewer: AbstractBaseUser | None):
    """Whom ``viewer`` may preview as: the people of their tenants and shared ones (Z12; everyone for a
    superuser). Another tenant's person is "No such user"."""
    if viewer is None:
        return get_user_model().objects.none()
    return get_user_model().objects.filter(users_visible_to_operator(user=viewer))


def visible_tool_pks(*, as_user: AbstractBaseUser | None, viewer: AbstractBaseUser) -> frozenset[int]:
    """The set a preview searches: the tools ``as_user`` may discover (what their MCP client gets), or with
    None every tool some client may get (never a held, disabled or archived one: those reach nobody) —
    either way only on servers ``viewer`` may see in the admin (shared ones and their tenants', Z12)."""
    scope = tools_servable().filter(server__in=Server.objects.filter(servers_visible_to_operator(user=viewer)))
    if as_user is None:
        return frozenset(scope.filter(pk__in=indexable_tools().values("pk")).values_list("pk", flat=True))
    seen = tool_pks_visible_to(principal=principal_for_user(as_user))
    return frozenset(scope.filter(pk__in=seen).values_list("pk", flat=True))


@dataclass
class PreviewOutcome:
    result: SearchResult | None = None
    error: str = ""


def preview_run(
    *, query: str, visible: Collection[int], top_k: int, fusion: str | None, viewer: AbstractBaseUser
) -> PreviewOutcome:
    """One search as the gateway runs it; a bad query becomes a message, never an exception. ``viewer``: the
    curator, whose own cached request vectors it may reuse (``vector_cache_scope``)."""
    try:
        # The curator sees the ranking even where the gateway would withhold it; ``confidence`` is the one the
        # gateway gives (decided the same way whether or not the answer is withheld).
        result = tool_search(
            query=query,
            visible=visible,
            top_k=top_k,
            fusion=fusion or None,
            enforce_abstention=False,
            cache_scope=vector_cache_scope(viewer),
        )
        return PreviewOutcome(result)
    except SearchQueryError as exc:
        return PreviewOutcome(error=str(exc))


@dataclass
class ExampleCheck:
    text: str
    negative: bool  # a negative example: the tool should NOT come up for it
    rank: int | None  # the tool's fused rank (None: not returned)
    returned: int  # how many matches came back
    abstained: bool
    degraded: bool
    confidence: str = ""
    error: str = ""
    top: list[Match] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        if self.error:
            return False
        return self.rank is None if self.negative else self.rank == 1


def tool_examples_check(
    *, tool: Tool, visible: Collection[int], viewer: AbstractBaseUser, top_k: int = TOP_K_MAX, fusion: str | None = None
) -> list[ExampleCheck]:
    """Run each example request (and negative example) of ``tool``; report where the tool lands."""
    texts = [(e.text, False) for e in tool.examples.all()] + [(n.text, True) for n in tool.negative_examples.all()]
    checks = []
    for text, negative in texts:
        outcome = preview_run(query=text, visible=visible, top_k=top_k, fusion=fusion, viewer=viewer)
        if outcome.result is None:
            checks.append(ExampleCheck(text, negative, None, 0, False, False, error=outcome.error))
            continue
        matches = outcome.result.matches
        rank = next((m.fused_rank for m in matches if m.tool_pk == tool.pk), None)
        checks.append(
            ExampleCheck(
                text,
                negative,
                rank,
                len(matches),
                outcome.result.abstained,
                outcome.result.degraded,
                confidence=outcome.result.confidence.value,
                top=matches[:3],
            )
        )
    return checks


LEARNED_PERMISSION = "search.view_learnedrequest"  # who may read learned requests may read that one matched


def _seen_by(why: dict, *, learned_shown: bool) -> dict:
    """``why`` as a viewer who may not read learned requests (an operator: ``catalog.view_tool`` alone) is shown it:
    the tool's own closest text where a learned request was closest, as an agent's answer says
    (``mcpgateway.services.discovery._why_lines``). "learned" told them that someone's request close to the one they
    typed led to a call of the tool, a guess at users' words confirmed (they may not read the query log either)."""
    if learned_shown or why.get("closest") != "learned":
        return why
    own = why.get("own") or {}
    return {**why, "closest": own.get("closest"), "example_request": own.get("example_request")}


def why_lines(match: Match, *, learned_shown: bool = True) -> list[str]:
    """why_matched as short plain lines for the template (which escapes them). Function words ("about", "de") are
    left out, as on the MCP why-lines: they matched but are no reason a curator can act on."""
    why = _seen_by(match.why_matched or {}, learned_shown=learned_shown)
    closest_example = why.get("example_request") if why.get("closest") == "example" else None
    lines = []
    for label, terms in (why.get("fields") or {}).items():
        words = [str(term) for term in terms if not function_word(str(term))]
        if words and not (closest_example and label == EXAMPLE_LABEL):
            lines.append(f"{label}: {', '.join(words)}")
    if closest_example:
        lines.append(_example_line(closest_example, (why.get("fields") or {}).get(EXAMPLE_LABEL, [])))
    elif why.get("closest") == "learned":
        lines.append("closest vector: requests that led to this tool (learned from usage)")
    elif why.get("closest"):
        lines.append(f"closest vector: {why['closest']}")
    return lines  # intent and demotion: among the score's parts


EXAMPLE_LABEL = "example request"


def _example_line(closest: str, terms: list) -> str:
    """One line for the example requests that matched, where the preview said "example request" twice, once for
    its words and once for its text (adminux33): the words of the one closest in meaning are named with it, and
    words only other example requests hold say there were two of them (or more)."""
    words = [str(term) for term in terms if not function_word(str(term))]
    own = set(tokenize(closest))
    elsewhere = [word for word in words if word not in own]
    line = f"example request “{closest}”: closest in meaning"
    if words and not elsewhere:
        return f"{line}, words {', '.join(words)}"
    if elsewhere:
        noun = "word" if len(elsewhere) == 1 else "words"
        return f"2 example requests: “{closest}” closest in meaning; another has the {noun} {', '.join(elsewhere)}"
    return line


# Fields a curator writes (the rest come from the upstream server).
CURATED_FIELDS = frozenset({"title", "alias", "purpose", "keyword", "operation verb", "entity type", "example request"})


@dataclass(frozen=True)
class ScorePart:
    label: str
    value: float | None  # None: a demotion (no number: the tool goes below every tool not demoted)
    detail: str


@dataclass(frozen=True)
class ScoreParts:
    """The ranking's own explanation of a match's place (``why_matched["score"]``), labelled for people."""

    rank_score: float | None
    fit: float
    parts: list[ScorePart]
    demoted: bool = False
    step: int = 0


def score_parts(match: Match, *, learned_shown: bool = True) -> ScoreParts:
    """Split the rank score into what made it, from the values the ranking recorded (nothing recomputed)."""
    why = _seen_by(match.why_matched or {}, learned_shown=learned_shown)
    score = why.get("score")
    if not score:  # the no-index listing: no ranking ran
        return ScoreParts(None, match.score, [])
    parts = []
    fields = why.get("fields") or {}
    if "bm25" in score:
        curated = [label for label in fields if label in CURATED_FIELDS]
        upstream = [label for label in fields if label not in CURATED_FIELDS]
        detail = "; ".join(
            f"{kind}: {', '.join(labels)}" for kind, labels in (("curated", curated), ("upstream", upstream)) if labels
        )
        parts.append(ScorePart("BM25 (words)", score["bm25"], detail or "no request word in its text"))
    if "dense" in score:
        closest = why.get("closest")
        if closest == "example":
            detail = f"closest: curated example request “{why.get('example_request', '')}”"
        elif closest == "learned":
            detail = "closest: requests that led to this tool (learned from usage)"
        elif closest:
            detail = f"closest: its {closest} text"
        else:
            detail = "no dense branch (model unavailable)"
        parts.append(ScorePart("Dense (meaning)", score["dense"], detail))
    if score.get("intent"):
        kind = "bonus: its operation fits the request" if score["intent"] > 0 else "penalty: another operation"
        parts.append(ScorePart("Intent", score["intent"], kind))
    if score.get("server"):
        parts.append(ScorePart("Server", score["server"], "a share of its server's best match for this request"))
    if score.get("name"):
        parts.append(ScorePart("Name", score["name"], "its name's words are in the request"))
    if score.get("deprecated"):
        parts.append(ScorePart("Deprecated", score["deprecated"], "its upstream marks it deprecated"))
    if score.get("cluster"):
        parts.append(ScorePart("Cluster", score["cluster"], "its text is close to the other candidates'"))
    if score.get("demoted"):
        parts.append(ScorePart("Negative query", None, "close to a negative query: ranked below every other tool"))
    return ScoreParts(score["rank_score"], score["fit"], parts, bool(score.get("demoted")), score.get("step", 0))


# -- admin views (mounted under /admin/search/preview/ by ``urls()``, inside the admin's login) ------------


def _check_preview_permission(request: HttpRequest) -> None:
    if not request.user.has_perm(PREVIEW_PERMISSION):
        raise PermissionDenied


def _context(request: HttpRequest, title: str, **extra: object) -> dict:
    return {**admin.site.each_context(request), "opts": IndexGeneration._meta, "title": title, **extra}


def preview_view(request: HttpRequest) -> HttpResponse:
    """Type a request, see the ranked tools as a user's MCP client would (by default the curator themself, or
    every tool some client may get when they may discover none), with each tool's rank score and its parts."""
    _check_preview_permission(request)
    # A curator who may discover no tool themselves (most do not call tools) would get an empty ranking: the page
    # and every link that gives the query only (the home, a tool's page) rank among every tool for them instead.
    own = visible_tool_pks(as_user=request.user, viewer=request.user)
    scope = AS_USER if own else EVERY_TOOL
    tool = _preview_tool(request)
    # A link without a request (a tool's page: "Search preview") opens the box empty, not with an error.
    data = request.GET.copy() if "query" in request.GET else None
    if data is not None:  # a link may give the query only, or the query and a user to preview as
        data.setdefault("scope", AS_USER if data.get("as_user") else scope)
        data.setdefault("top_k", str(PreviewForm.base_fields["top_k"].initial))
    form = PreviewForm(
        data,
        initial={"scope": scope},
        viewer=request.user,
        may_choose_user=request.user.has_perm(AS_USER_PERMISSION),
    )
    _query_hint(form, tool)
    outcome, rows, as_user, empty_self = None, [], None, False
    if form.is_valid():
        if form.cleaned_data["scope"] != EVERY_TOOL:
            as_user = form.cleaned_data.get("as_user") or request.user
        visible = own if as_user == request.user else visible_tool_pks(as_user=as_user, viewer=request.user)
        empty_self = as_user == request.user and not visible
        outcome = preview_run(
            query=form.cleaned_data["query"],
            visible=visible,
            top_k=form.cleaned_data["top_k"] or form.fields["top_k"].initial,
            fusion=form.cleaned_data.get("fusion"),
            viewer=request.user,
        )
        if outcome.result is not None:
            shown = request.user.has_perm(LEARNED_PERMISSION)
            rows = [
                (match, why_lines(match, learned_shown=shown), score_parts(match, learned_shown=shown))
                for match in outcome.result.matches
            ]
    context = _context(
        request,
        "Search preview",
        form=form,
        outcome=outcome,
        rows=rows,
        as_user=as_user,
        empty_self=empty_self,
        own_empty=not own,
        tool=tool,
        tool_examples=[example.text for example in tool.examples.all()] if tool else [],
        tool_match=next((match for match, _, _ in rows if tool and match.tool_pk == tool.pk), None),
    )
    return render(request, "admin/search/preview.html", context)


def _preview_tool(request: HttpRequest) -> Tool | None:
    """The tool a preview was opened for (``?tool=<pk>``, from its page), among the servers this person may see in the
    admin; None without one, or for one they may not see (the preview is then the plain one)."""
    try:
        pk = int(request.GET.get("tool", ""))
    except ValueError:
        return None
    servers = Server.objects.filter(servers_visible_to_operator(user=request.user))
    return Tool.objects.select_related("server").filter(server__in=servers, pk=pk).first()


def _query_hint(form: PreviewForm, tool: Tool | None) -> None:
    """The request box takes the focus, with a hint in a user's words (the tool's own example requests are offered
    above it): a curator types a request, never the tool's title, which no user would send."""
    attrs = form.fields["query"].widget.attrs
    attrs["autofocus"] = True
    hint = f"a request a user would make for {tool.tool_id}" if tool else "what a user would ask, in their own words"
    attrs["placeholder"] = hint


def tool_examples_view(request: HttpRequest, tool_pk: int) -> HttpResponse:
    """Run a tool's example requests (and negative examples) and show where the tool lands."""
    _check_preview_permission(request)
    servers = Server.objects.filter(servers_visible_to_operator(user=request.user))
    tool = get_object_or_404(Tool.objects.select_related("server").filter(server__in=servers), pk=tool_pk)
    as_user = None
    username = request.GET.get("as_user", "")
    if username and (username == request.user.get_username() or request.user.has_perm(AS_USER_PERMISSION)):
        as_user = get_object_or_404(people_visible_to(request.user), username=username)
    visible = visible_tool_pks(as_user=as_user, viewer=request.user)
    checks = tool_examples_check(tool=tool, visible=visible, viewer=request.user)
    servable = tool.pk in visible_tool_pks(as_user=None, viewer=request.user)
    # Back to the tool's page, where its example requests are edited (for whom may open it).
    may_open = request.user.has_perm("catalog.view_tool")
    tool_url = reverse("admin:catalog_tool_change", args=[tool.pk]) if may_open else ""
    context = _context(
        request,
        f"Example requests of {tool.tool_id}",
        tool=tool,
        tool_url=tool_url,
        checks=checks,
        as_user=as_user,
        servable=servable,
    )
    return render(request, "admin/search/preview_tool.html", context)


def urls() -> list:
    """URL patterns for scoutsite/urls.py, placed before ``admin/`` (admin_view: staff login, CSRF, no cache)."""
    return [
        path("admin/search/preview/", admin.site.admin_view(preview_view), name="search_preview"),
        path(
            "admin/search/preview/tool/<int:tool_pk>/",
            admin.site.admin_view(tool_examples_view),
            name="search_preview_tool",
        ),
    ]
