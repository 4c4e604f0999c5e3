"""Default governance fields from upstream MCP annotations, read as untrusted hints. ORM-free.

Only an explicit ``readOnlyHint: true`` makes a tool "read". Per the MCP spec a non-read-only tool is
destructive unless it says ``destructiveHint: false``, so a tool without annotations counts as a mutating,
irreversible, high-risk tool. Hints can only make a tool look safer than it is, which is why an admin's
classification always wins over them.

Hints are also checked against what the tool says it does (``classification_derive``): the defaults are never
less strict than the tool's own name and description. A ``readOnlyHint: true`` tool named ``delete_file`` or
described as "Permanently delete every file", or a ``destructiveHint: false`` tool that says it wipes or pays,
is a contradiction: the tool is treated as mutating, irreversible and high risk (so it needs approval) until an
admin classifies it, and the contradiction is kept as the policy's ``classification_note``.
"""

import re
from dataclasses import dataclass
from typing import Any

from .choices import OperationClass, Reversibility, RiskLevel
from .sanitize import screen_skeleton

# Verbs whose effect cannot be taken back (data destroyed, messages or money gone, processes ended) and that
# are rarely nouns: they count wherever they appear in the name, and as verbs anywhere in the description.
IRREVERSIBLE_VERBS = frozenset(
    {
        "delete", "remove", "drop", "destroy", "wipe", "erase", "purge", "truncate", "overwrite", "kill",
        "terminate", "shred", "revoke", "uninstall", "unlink", "rmdir", "nuke", "expunge", "send", "pay",
        "withdraw", "transmit", "shutdown", "reboot",
    }
)  # fmt: skip
# Irreversible too, but as often nouns ("get_transfer", "a refund id", "date format"): they count only where a
# verb stands, i.e. as the name's action and at the start of a clause in the description.
AMBIGUOUS_IRREVERSIBLE_VERBS = frozenset(
    {"transfer", "charge", "refund", "purchase", "buy", "sell", "trade", "email", "clear", "format", "reset", "ban"}
)
# Verbs that change state without destroying anything; they count only as the name's action. Not here: verbs
# that as often name a computation or a read ("add" two numbers, "run"/"execute" a query, "set" of results).
MUTATING_VERBS = frozenset(
    {
        "create", "update", "modify", "write", "edit", "insert", "upsert", "rename", "move", "upload", "post",
        "submit", "merge", "close", "cancel", "approve", "deploy", "install", "restart", "stop", "invite",
        "assign", "book", "push", "commit", "archive", "lock", "unlock", "enable", "disable", "replace",
        "patch", "save", "grant", "mute", "publish", "reply", "launch", "mkdir", "append", "register",
    }
)  # fmt: skip
# A name whose action is one of these reads ("get_post", "list_workflow_runs"): later nouns are not its action.
READ_VERBS = frozenset(
    {
        "get", "list", "search", "find", "read", "fetch", "query", "describe", "show", "view", "lookup", "check",
        "count", "retrieve", "download", "export", "inspect", "browse", "scan", "stat", "status", "info", "diff",
        "blame", "preview", "validate", "verify", "explain", "analyze", "summarize", "extract", "compare",
    }
)  # fmt: skip
_STRONG_TEXT_RE = re.compile(r"\b(" + "|".join(sorted(IRREVERSIBLE_VERBS)) + r")(?:s|es|ing)?\b")
_AMBIGUOUS_TEXT_RE = re.compile(
    r"(?:^|[.;:!?\n]\s*|\b(?:to|will|then|also|can|may|permanently|immediately|irreversibly)\s+)("
    + "|".join(sorted(AMBIGUOUS_IRREVERSIBLE_VERBS))
    + r")(?:s|es)?\b"
)
_NEGATION_RE = re.compile(r"\b(?:not|never|no|without|cannot|can't|won't|doesn't|don't|nor)\s+(?:\w+\s+){0,2}$")
_NAME_TOKEN_RE = re.compile(r"[A-Z]?[a-z]+|[A-Z]+(?![a-z])|\d+")
# Reads that hand over secrets: what Scout gives a server to run with (Server.env_vars: API keys, tokens) or what
# it keeps. The everything server's get-env "Returns all environment variables", hinted read-only.
# In a name only "env" counts: "secret" and "password" name too many tools that hold none ("list_secret_scanning_
# alerts", "validate_password_policy"); those are read from the description.
SECRET_NAME_WORDS = frozenset({"env", "environ"})
_SECRETS_TEXT_RE = re.compile(
    r"\b(?:return|print|dump|list|show|reveal|expose|output|display|read|get|fetch|retrieve)(?:s|es|ing)?\s+"
    r"(?:(?:all|the|every|current|its|process|server|stored|of)\s+){0,3}"
    r"(environment variables?|env vars?|secrets|credentials?|passwords?|api keys?|access tokens?|private keys?)\b"
)


@dataclass(frozen=True)
class Classification:
    operation_class: str
    reversibility: str
    risk: str
    # Why these defaults are stricter than the hints say; empty when the hints were taken as they are.
    note: str = ""


MUTATING_HIGH = (OperationClass.WRITE, Reversibility.IRREVERSIBLE, RiskLevel.HIGH)


def classification_from_annotations(annotations: Any) -> Classification:
    """Defaults from the annotations alone (the upper bound on how safe a tool can be made to look)."""
    hints = annotations if isinstance(annotations, dict) else {}
    # `is True`: a string "true" or any other non-boolean is not a hint we trust.
    if hints.get("readOnlyHint") is True:
        return Classification(OperationClass.READ, Reversibility.REVERSIBLE, RiskLevel.LOW)
    if hints.get("destructiveHint") is False:
        reversibility = Reversibility.REVERSIBLE if hints.get("idempotentHint") is True else Reversibility.COMPENSATABLE
        return Classification(OperationClass.WRITE, reversibility, RiskLevel.MODERATE)
    return Classification(*MUTATING_HIGH)


def name_verbs(name: str) -> set[str]:
    """State-changing verbs in the tool's name (``delete_file``, ``dropTable``, ``github_create_issue``): an
    irreversible verb anywhere; any other state-changing verb only before the first reading verb."""
    tokens = [token.lower() for token in _NAME_TOKEN_RE.findall(name or "")]
    found = {token for token in tokens if token in IRREVERSIBLE_VERBS}
    for token in tokens:
        if token in READ_VERBS:
            break
        if token in MUTATING_VERBS or token in AMBIGUOUS_IRREVERSIBLE_VERBS:
            found.add(token)
    return found


def text_verbs(text: str) -> set[str]:
    """Irreversible verbs used as verbs in ``text`` (look-alike letters folded), unless negated just before
    ("does not delete anything")."""
    skeleton = screen_skeleton(text or "")
    found: set[str] = set()
    for pattern in (_STRONG_TEXT_RE, _AMBIGUOUS_TEXT_RE):
        for match in pattern.finditer(skeleton):
            if not _NEGATION_RE.search(skeleton[max(0, match.start(1) - 40) : match.start(1)]):
                found.add(match.group(1))
    return found


def secrets_revealed(*, name: str, text: str) -> str:
    """What in a tool's name or description says it returns secrets ("env" in get-env, "returns all environment
    variables"), or ""."""
    named = sorted({token.lower() for token in _NAME_TOKEN_RE.findall(name or "")} & SECRET_NAME_WORDS)
    if named:
        return named[0]
    found = _SECRETS_TEXT_RE.search(screen_skeleton(text or ""))
    return found.group(1) if found else ""


def classification_derive(*, annotations: Any, name: str, title: str = "", description: str = "") -> Classification:
    """Defaults for a tool an admin has not classified: the hints, made stricter when the tool's own words
    contradict them. Never less strict than ``classification_from_annotations``."""
    hinted = classification_from_annotations(annotations)
    if hinted.risk == RiskLevel.HIGH and hinted.reversibility == Reversibility.IRREVERSIBLE:
        return hinted  # already the strictest default
    named = name_verbs(name)
    described = text_verbs(f"{title}\n{description}")
    if hinted.operation_class == OperationClass.READ:
        said = sorted(named | described)
        if said:
            return Classification(
                *MUTATING_HIGH,
                note=_note("readOnlyHint is true", said),
            )
        revealed = secrets_revealed(name=name, text=f"{title}\n{description}")
        if revealed:
            return Classification(
                OperationClass.READ,
                Reversibility.REVERSIBLE,
                RiskLevel.HIGH,
                note=(
                    f"The tool hands over secrets: its name or description says {revealed!r}. Treated as a high-risk "
                    "read (every call needs approval) until an admin classifies it."
                )[:300],
            )
        return hinted
    # destructiveHint false: a non-destructive writer that names an irreversible effect is a contradiction.
    said = sorted((named & (IRREVERSIBLE_VERBS | AMBIGUOUS_IRREVERSIBLE_VERBS)) | described)
    if said:
        return Classification(*MUTATING_HIGH, note=_note("destructiveHint is false", said))
    return hinted


def _note(hint: str, words: list[str]) -> str:
    quoted = ", ".join(f"'{word}'" for word in words[:5])
    return (
        f"Hints contradict the tool: {hint} but its name or description says {quoted}. "
        "Treated as mutating, irreversible, high risk until an admin classifies it."
    )[:300]
