"""Change review ("rug pull" defence): hold a tool whose accepted definition changed, or whose text looks
like an injection at first sight, until a curator accepts it.

Errors: ReviewError when a review cannot be decided (already decided, or a newer revision superseded it);
PermissionDenied when the person deciding may not shape the tool (a shared server's, once there are tenants).
"""

import difflib
import json
import re
from collections.abc import Collection, Sequence

from django.contrib.auth.models import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models.functions import Length, Lower
from django.utils import timezone

from catalog.choices import Transport
from catalog.models import Server, Tool, ToolRevision
from catalog.signals import DefinitionChange
from governance.cache import visibility_invalidate
from governance.choices import AuditEventType, AuditOutcome, ReviewKind, ReviewStatus
from governance.models import ServerTenant, ToolPolicy, ToolReview
from governance.modeltext import definition_exact_texts_read_otherwise
from governance.principals import principal_for_user
from governance.sanitize import definition_text, suspicious_markers
from governance.selectors import policy_version_current, server_tenant_id, tool_shaped_by
from governance.services.approvals import approvals_void_for_tools
from governance.services.audit import audit_event_build, audit_record, audit_record_many
from governance.services.policy import (
    SHARED_TOOL_REFUSED,
    risk_classes_by_name,
    tool_policy_apply_hints,
    tool_policy_build,
    tool_policy_ensure,
)

# A schema's enum or const value or property name, kept as written for the call, that a model would be shown otherwise
# were it a description: the gateway's voice, a refused link (``definition_exact_texts_read_otherwise``).
SCHEMA_VALUE_MARKER = "schema-value-for-model"
BATCH_SIZE = 500
# Shadowing (T8): a new tool with the name of another server's tool whose description contains the other's (at
# least this share of the shorter text's characters match, ``_copy_share``) is held naming the original, unless
# an operator marked the two servers alternatives. Only where a copy can take the original's calls from someone
# who may know the original (``_originals_copied``): both servers live (an imported one has no connection, so a
# batch import never holds its own members), other upstreams (``UPSTREAM_FIELDS``: the same program or URL
# registered twice is the same server), and the original shared or in the copy's tenant (every reader of the
# copy may see it: a copy in another tenant captures none of its searches, and its hold would tell that tenant
# the original exists). Public catalogs, read as live servers of one tenant (bench/NOTES-capture.md): 92 of
# 5,704 tools, 91 of them ToolBench's republished APIs (3.7% of its 2,479), 1 of the other 3,225 (0.03%).
COPY_SHARE = 0.9
NEAR_COPY_MARKER = "near-copy of "
COPY_CHARS = 1000
# A copy under another name (redteam28): a new tool whose description holds another server's tool's just as well,
# under any name (``save_file`` beside ``write_file``, ``write-file``, ``echo_v2``), takes the same searches, since
# ranking reads the words, not the name. Held too when the shorter description has at least this many characters
# (folded): short ones ("Navigate to a URL", "Get information about a specific slide.") are shared by honest tools
# of unrelated servers (345 of ToolBench's 2,479 at any length), while a description this long is someone's own
# text (public catalogs: 3 of ToolBench's tools, 0 of the other 3,225, besides the same-named copies).
COPY_ANY_NAME_CHARS = 120
# Candidates for a copy under another name share at least this share of the shorter text's distinct words (a
# necessary condition, near enough, of ``COPY_SHARE`` of its characters), counted over words in at most
# COPY_COMMON_WORDS of the compared tools: a copy is found without comparing every pair.
COPY_WORD_SHARE = 0.6
COPY_COMMON_WORDS = 0.05
# Where a live server's calls go: two servers alike in these run the same upstream (environment variables and
# credentials aside: the same program for another account is no impersonator).
UPSTREAM_FIELDS = {
    Transport.STDIO: ("command", "args"),
    Transport.HTTP: ("url",),
    Transport.OPENAPI: ("base_url", "openapi_url"),
}
# What a definition review may change on an existing policy (the rest belongs to admins).
POLICY_REVIEW_FIELDS = [
    "operation_class",
    "reversibility",
    "risk_class",
    "classification_note",
    "accepted_hash",
    "held",
    "hold_reason",
    "markers",
    "updated_at",
]


class ReviewError(Exception):
    """A review cannot be decided; the message says why."""


def _definition_of(tool: Tool, revision: ToolRevision | None) -> dict:
    return revision.definition if revision is not None else tool.upstream_definition()


def tool_definition_review(*, tool: Tool, revision: ToolRevision | None, previous_hash: str | None) -> ToolPolicy:
    """Review one new or changed definition (a tool created outside a sync); see ``tool_definitions_review``."""
    [policy] = tool_definitions_review(changes=[DefinitionChange(tool, revision, previous_hash)])
    return policy


def tool_definitions_review(*, changes: Sequence[DefinitionChange]) -> list[ToolPolicy]:
    """React to new or changed upstream definitions (called inside the sync's transaction), one policy each.

    First sight of clean text: accepted. First sight of suspicious text, or any change after a definition
    was accepted: held, with a pending ToolReview and one ``review.held`` audit event per held tool, so the
    tool leaves every visible set in this same transaction. A tool that returns to its accepted definition is
    released. Governance defaults are re-derived from the new annotations unless an admin classified the tool.

    A sync or import sends a whole listing at once: the queries are bounded per call (3 for new clean tools,
    7 when some are held), never one per tool. Each tool appears at most once in ``changes``."""
    if not changes:
        return []
    tools = [change.tool for change in changes]
    policies = _policies_by_tool([tool.pk for tool in tools])
    risk_classes = risk_classes_by_name()
    # Older pending reviews are replaced by the one for the current definition.
    for chunk in _chunks(list(policies)):
        ToolReview.objects.filter(tool_id__in=chunk, status=ReviewStatus.PENDING).update(status=ReviewStatus.SUPERSEDED)
    # A new definition, or one changed from what was accepted: a tool changed into a copy of another server's is
    # named as such in its review, as a new copy is (redteam30). One back at its accepted definition is not read.
    accepted = {pk: policy.accepted_hash for pk, policy in policies.items() if policy.accepted_hash}
    originals = _originals_copied(
        [change.tool for change in changes if change.tool.definition_hash != accepted.get(change.tool.pk)],
        changed=set(accepted),
    )
    created: list[ToolPolicy] = []
    updated: list[ToolPolicy] = []
    reviews: list[ToolReview] = []
    for change in changes:
        policy = policies.get(change.tool.pk)
        if policy is None:
            policy = policies[change.tool.pk] = tool_policy_build(tool=change.tool, risk_classes=risk_classes)
            created.append(policy)
        else:
            tool_policy_apply_hints(policy=policy, tool=change.tool, risk_classes=risk_classes)
            updated.append(policy)
        review = _hold_decide(policy=policy, change=change, original=originals.get(change.tool.pk))
        if review is not None:
            reviews.append(review)

    now = timezone.now()
    for policy in updated:
        policy.updated_at = now  # bulk_update skips auto_now
    ToolPolicy.objects.bulk_create(created, batch_size=BATCH_SIZE)
    ToolPolicy.objects.bulk_update(updated, POLICY_REVIEW_FIELDS, batch_size=BATCH_SIZE)
    ToolReview.objects.bulk_create(reviews, batch_size=BATCH_SIZE)
    _audit_holds(reviews)
    visibility_invalidate()
    # A tool seen for the first time (its policy made just now) has no approval to void: not a query per server of
    # an import or a first sync.
    first_seen = {policy.tool_id for policy in created}
    _void_approvals_of_held([review for review in reviews if review.tool_id not in first_seen])
    return [policies[tool.pk] for tool in tools]


def _folded(text: str) -> str:
    return " ".join(text.lower().split())[:COPY_CHARS]


def _copy_share(a: str, b: str) -> float:
    """Share of the shorter text's characters found, in order, in the other (whitespace and case folded)."""
    a, b = _folded(a), _folded(b)
    if not a or not b:
        return 0.0
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return sum(block.size for block in matcher.get_matching_blocks()) / min(len(a), len(b))


def near_copy(name: str, description: str, other_name: str, other_description: str) -> bool:
    """Whether a tool named ``name`` with ``description`` copies the other: ``COPY_SHARE`` of the shorter
    description's characters in the other, under the same name (case folded), or under any name when the shorter
    description has ``COPY_ANY_NAME_CHARS`` characters."""
    if name.lower() != other_name.lower():
        if min(len(_folded(description)), len(_folded(other_description))) < COPY_ANY_NAME_CHARS:
            return False
    return _copy_share(description, other_description) >= COPY_SHARE


def _words(text: str) -> frozenset[str]:
    return frozenset(re.findall(r"\w+", _folded(text)))


class LongCopyFinder:
    """The tools among ``descriptions`` (key -> description) whose description a long one may copy under another
    name (``near_copy``): those sharing ``COPY_WORD_SHARE`` of the shorter text's words, looked up by word."""

    def __init__(self, descriptions: dict) -> None:
        self.words = {
            key: _words(text) for key, text in descriptions.items() if len(_folded(text)) >= COPY_ANY_NAME_CHARS
        }
        postings: dict[str, list] = {}
        for key, words in self.words.items():
            for word in words:
                postings.setdefault(word, []).append(key)
        common = max(50, int(COPY_COMMON_WORDS * len(self.words)))
        self.postings = {word: keys for word, keys in postings.items() if len(keys) <= common}
        self.rare = {key: sum(1 for word in words if word in self.postings) for key, words in self.words.items()}

    def candidates(self, description: str) -> list:
        """Keys whose descriptions ``description`` may copy, in no particular order (none for a short one)."""
        if len(_folded(description)) < COPY_ANY_NAME_CHARS:
            return []
        words = [word for word in _words(description) if word in self.postings]
        shared: dict = {}
        for word in words:
            for key in self.postings[word]:
                shared[key] = shared.get(key, 0) + 1
        return [key for key, count in shared.items() if count >= COPY_WORD_SHARE * min(len(words), self.rare[key])]


def _upstream(server: Server) -> tuple | None:
    """Where ``server``'s calls go (``UPSTREAM_FIELDS``); None when it has no live connection (imported)."""
    fields = UPSTREAM_FIELDS.get(server.transport)
    if fields is None:
        return None
    return (server.transport, *(json.dumps(getattr(server, name), sort_keys=True) for name in fields))


def _originals_copied(tools: list[Tool], *, changed: Collection[int] = ()) -> dict[int, Tool]:
    """For each new or changed tool that copies another server's tool (``near_copy``: same name, case folded, or any
    name for a long description; description containing the other's, ``COPY_SHARE``): that tool, the oldest if
    several. A new tool copies only older tools; a tool in ``changed`` (one accepted before, now with new words) any
    tool but its own copy (one once reviewed as a copy of it), since its words are the newest (redteam32). Only between
    live servers, the original shared or in the copy's tenant and older than the same upstream's own tool of that name
    if it was registered before (``UPSTREAM_FIELDS``); servers marked alternatives are skipped (see ``COPY_SHARE``)."""
    servers = {tool.server_id: tool.server for tool in tools if Tool.server.is_cached(tool)}  # a sync's: no query
    servers |= Server.objects.in_bulk({tool.server_id for tool in tools} - set(servers))
    tools = [tool for tool in tools if _upstream(servers[tool.server_id]) is not None]
    if not tools:
        return {}
    others = Tool.objects.exclude(server_id__in=list(servers))
    names = sorted({tool.name.lower() for tool in tools})
    by_name: dict[str, list[Tool]] = {}
    for chunk in [names[start : start + BATCH_SIZE] for start in range(0, len(names), BATCH_SIZE)]:
        for other in others.annotate(lname=Lower("name")).filter(lname__in=chunk).select_related("server__tenancy"):
            by_name.setdefault(other.lname, []).append(other)
    long_copied = _long_copy_candidates(tools, others)
    if not by_name and not long_copied:
        return {}
    alternatives = set(
        Server.alternatives.through.objects.filter(from_server_id__in=list(servers)).values_list(
            "from_server_id", "to_server_id"
        )
    )
    tenants = dict(ServerTenant.objects.filter(server_id__in=list(servers)).values_list("server_id", "tenant_id"))
    candidates_of = {
        tool.pk: {other.pk: other for other in [*by_name.get(tool.name.lower(), []), *long_copied.get(tool.pk, [])]}
        for tool in tools
    }
    copies = _reviewed_as_copies({pk for tool in tools if tool.pk in changed for pk in candidates_of[tool.pk]})
    found: dict[int, Tool] = {}
    for tool in tools:
        upstream, tenant = _upstream(servers[tool.server_id]), tenants.get(tool.server_id)
        for other in sorted(candidates_of[tool.pk].values(), key=lambda other: other.pk):  # oldest first
            if other.pk > tool.pk and tool.pk not in changed:
                break  # a new tool's original is older than it
            if tool.pk in copies.get(other.pk, ()):
                continue  # a changed original is no copy of its copy, whichever was registered first
            if server_tenant_id(other.server) not in (None, tenant):
                continue
            if _upstream(other.server) == upstream:
                if other.name.lower() == tool.name.lower():
                    break  # this upstream's own tool, registered before: only what came before that is an original
                continue
            if (tool.server_id, other.server_id) in alternatives or _upstream(other.server) is None:
                continue
            if near_copy(tool.name, tool.description, other.name, other.description):
                found[tool.pk] = other
                break
    return found


def _reviewed_as_copies(tool_pks: set[int]) -> dict[int, set[int]]:
    """For the tools among ``tool_pks`` once held as a near-copy of another (whatever a curator decided since), the
    pks of the tools they were held as copies of (``ToolReview.copy_of``, not the marker's words)."""
    found: dict[int, set[int]] = {}
    for chunk in _chunks(sorted(tool_pks)):
        reviews = ToolReview.objects.filter(tool_id__in=chunk, copy_of__isnull=False)
        for pk, original_pk in reviews.values_list("tool_id", "copy_of_id"):
            found.setdefault(pk, set()).add(original_pk)
    return found


def _long_copy_candidates(tools: list[Tool], others) -> dict[int, list[Tool]]:
    """For each of ``tools`` with a long description, the tools of ``others`` (a queryset) it may copy under another
    name (``LongCopyFinder``). Reads the long descriptions of ``others`` only when one of ``tools`` has one."""
    if not any(len(_folded(tool.description)) >= COPY_ANY_NAME_CHARS for tool in tools):
        return {}
    long_ones = others.annotate(chars=Length("description")).filter(chars__gte=COPY_ANY_NAME_CHARS)
    finder = LongCopyFinder(dict(long_ones.values_list("pk", "description")))
    wanted = {tool.pk: finder.candidates(tool.description) for tool in tools}
    loaded = Tool.objects.select_related("server__tenancy").in_bulk({pk for pks in wanted.values() for pk in pks})
    return {pk: [loaded[other] for other in pks] for pk, pks in wanted.items() if pks}


def _hold_decide(*, policy: ToolPolicy, change: DefinitionChange, original: Tool | None) -> ToolReview | None:
    """Set the policy's hold fields for the new definition; the unsaved ToolReview when it is held. ``original``:
    the other server's tool this new one copies (``_originals_copied``), named in the marker."""
    tool = change.tool
    definition = _definition_of(tool, change.revision)
    markers = suspicious_markers(definition_text(definition))
    if definition_exact_texts_read_otherwise(definition):
        markers.append(SCHEMA_VALUE_MARKER)
    if original is not None:
        markers.append(f"{NEAR_COPY_MARKER}{original.tool_id}")
    new_hash = tool.definition_hash
    first_sight = change.previous_hash is None or not policy.accepted_hash
    if new_hash == policy.accepted_hash and not markers:
        policy.held, policy.hold_reason, policy.markers = False, "", []
        return None
    if first_sight and not markers:
        policy.accepted_hash, policy.held, policy.hold_reason, policy.markers = new_hash, False, "", []
        return None
    policy.held = True
    policy.markers = markers
    policy.hold_reason = (
        f"suspicious text: {', '.join(markers)}" if markers else "upstream definition changed after acceptance"
    )[:300]
    return ToolReview(
        tool=tool,
        revision=change.revision,
        definition_hash=new_hash,
        previous_hash=policy.accepted_hash,
        kind=ReviewKind.SUSPICIOUS if first_sight else ReviewKind.CHANGED,
        markers=markers,
        copy_of=original,
    )


def tools_hold_for_signal(*, tool_pks: Collection[int], marker: str) -> list[int]:
    """Hold tools that a signal found after the sync as a suspicious first sight is held: the marker in the
    policy's reason and a pending ToolReview, one ``review.held`` event each (search's ``topic-spread``, measured
    with the vectors computed for indexing). Skipped: a tool held already, and one whose current definition a
    curator accepted in a review naming this marker (the decision stands until the definition changes).
    Returns the pks held. Call inside the indexing transaction."""
    tools = list(Tool.objects.filter(pk__in=tool_pks).select_related("policy"))
    accepted = {
        (review.tool_id, review.definition_hash)
        for review in ToolReview.objects.filter(tool_id__in=[t.pk for t in tools], status=ReviewStatus.ACCEPTED)
        if marker in (review.markers or [])
    }
    reviews: list[ToolReview] = []
    for tool in tools:
        policy = getattr(tool, "policy", None) or tool_policy_ensure(tool=tool)
        if policy.held or (tool.pk, tool.definition_hash) in accepted:
            continue
        policy.held, policy.markers = True, [*policy.markers, marker]
        policy.hold_reason = f"suspicious text: {', '.join(policy.markers)}"[:300]
        policy.save(update_fields=["held", "markers", "hold_reason", "updated_at"])
        reviews.append(
            ToolReview(
                tool=tool,
                definition_hash=tool.definition_hash,
                previous_hash=policy.accepted_hash,
                kind=ReviewKind.SUSPICIOUS,
                markers=[marker],
            )
        )
    ToolReview.objects.bulk_create(reviews)
    _audit_holds(reviews)
    if reviews:
        visibility_invalidate()
    _void_approvals_of_held(reviews)
    return [review.tool_id for review in reviews]


def _void_approvals_of_held(reviews: list[ToolReview]) -> None:
    """Open approvals for tools just held are void now, not at the sweep's next run: released before it (the
    definition back, or a curator's accept), an approval asked before the hold ran again (Z6, redteam55)."""
    approvals_void_for_tools(tool_pks=[review.tool_id for review in reviews])


def _audit_holds(reviews: list[ToolReview]) -> None:
    """One ``review.held`` event per held tool (not one per batch): the trail stays searchable by tool."""
    if not reviews:
        return
    version = policy_version_current().number
    servers = Server.objects.select_related("tenancy").in_bulk({review.tool.server_id for review in reviews})
    audit_record_many(
        events=[
            audit_event_build(
                event_type=AuditEventType.REVIEW_HELD,
                principal=None,
                tool=review.tool,
                server=servers[review.tool.server_id],
                outcome=AuditOutcome.SUCCESS,
                policy_version=version,
                payload={
                    "kind": review.kind,
                    "old_hash": review.previous_hash,
                    "new_hash": review.definition_hash,
                    "markers": review.markers,
                },
            )
            for review in reviews
        ]
    )


def _policies_by_tool(tool_pks: list[int]) -> dict[int, ToolPolicy]:
    policies: dict[int, ToolPolicy] = {}
    for chunk in _chunks(tool_pks):
        for policy in ToolPolicy.objects.select_related("risk_class").filter(tool_id__in=chunk):
            policies[policy.tool_id] = policy
    return policies


def _chunks(pks: list[int]) -> list[list[int]]:
    """Keep ``IN`` lists under SQLite's bound-parameter limit on a very large listing."""
    return [pks[start : start + BATCH_SIZE] for start in range(0, len(pks), BATCH_SIZE)]


def _decide(*, review: ToolReview, actor: AbstractBaseUser, reason: str, accept: bool) -> ToolReview:
    with transaction.atomic():
        review = ToolReview.objects.select_for_update().get(pk=review.pk)
        tool = Tool.objects.select_related("server").get(pk=review.tool_id)
        if not tool_shaped_by(user=actor, tool=tool):  # a shared tool is released for every tenant at once
            raise PermissionDenied(SHARED_TOOL_REFUSED)
        if review.status != ReviewStatus.PENDING:
            raise ReviewError(f"this review is already {review.get_status_display().lower()}")
        if accept and review.definition_hash != tool.definition_hash:
            raise ReviewError("the tool changed again since this review; review the newer revision")
        policy = tool_policy_ensure(tool=tool)
        review.status = ReviewStatus.ACCEPTED if accept else ReviewStatus.REJECTED
        review.decided_by, review.decided_at, review.reason = actor, timezone.now(), (reason or "")[:2000]
        review.save()
        old_hash = policy.accepted_hash
        if accept:
            policy.accepted_hash = tool.definition_hash
            policy.held, policy.hold_reason, policy.markers = False, "", []
            policy.save()
        audit_record(
            event_type=AuditEventType.REVIEW_ACCEPTED if accept else AuditEventType.REVIEW_REJECTED,
            principal=principal_for_user(actor, via="admin"),
            tool=tool,
            outcome=AuditOutcome.SUCCESS,
            payload={"old_hash": old_hash, "new_hash": review.definition_hash, "reason": review.reason},
        )
        visibility_invalidate()
    return review


def tool_review_accept(*, review: ToolReview, actor: AbstractBaseUser, reason: str = "") -> ToolReview:
    """Accept the reviewed definition: the tool is released (visible again to those granted it).
    Raises ReviewError if the review is decided already or the tool changed again since, PermissionDenied if
    ``actor`` may not shape the tool (``tool_shaped_by``)."""
    return _decide(review=review, actor=actor, reason=reason, accept=True)


def tool_review_reject(*, review: ToolReview, actor: AbstractBaseUser, reason: str = "") -> ToolReview:
    """Reject the reviewed definition: the tool stays held. Raises ReviewError if already decided,
    PermissionDenied if ``actor`` may not shape the tool (``tool_shaped_by``)."""
    return _decide(review=review, actor=actor, reason=reason, accept=False)


def tool_review_definition(*, review: ToolReview) -> dict:
    """The definition under review (a revision's, else the tool's upstream copy)."""
    return _definition_of(review.tool, review.revision)


def tool_review_diff(*, review: ToolReview) -> str:
    """Unified diff between the accepted definition and the reviewed one (pretty JSON, text)."""
    new = tool_review_definition(review=review)
    old_revision = (
        ToolRevision.objects.filter(tool_id=review.tool_id, definition_hash=review.previous_hash).first()
        if review.previous_hash
        else None
    )
    old = old_revision.definition if old_revision is not None else {}

    def lines(definition: dict) -> list[str]:
        return json.dumps(definition, indent=2, sort_keys=True, ensure_ascii=True).splitlines()

    return "\n".join(difflib.unified_diff(lines(old), lines(new), "accepted", "new revision", lineterm="", n=3))
