"""Operation intent: which operation a request asks for and which one a tool performs.

Second stage of ranking (RETRIEVAL-NOTES: improved every public set): a tool whose operation agrees with
the request gets a bonus, one that conflicts a smaller penalty. Ambiguous verbs map to two operations.
"""

from ..text import request_terms, split_identifier, tokenize

READ, CREATE, UPDATE, DELETE, RUN = "read", "create", "update", "delete", "run"

VERBS: dict[str, frozenset[str]] = {}


def _add(operations: tuple[str, ...], words: str) -> None:
    for word in words.split():
        VERBS[word] = VERBS.get(word, frozenset()) | frozenset(operations)


_add(
    (READ,),
    "get read fetch retrieve show view display list search find lookup look query describe inspect "
    "download check count browse see tell what which status info details export "
    "summarize analyze compare monitor track",
)
_add(
    (CREATE,),
    "create add new make insert generate post upload register compose draft build publish send submit "
    "schedule book invite import save record log remember memorize memorise",
)
_add((UPDATE,), "update edit modify change rename move patch replace assign append merge label tag enable disable")
_add((DELETE,), "delete remove destroy drop erase clear purge cancel uninstall unsubscribe revoke archive")
_add((RUN,), "run execute trigger invoke launch call deploy start restart stop evaluate compute convert translate")
_add((CREATE, READ), "open")
_add((UPDATE, DELETE), "close")
_add((UPDATE, CREATE), "set write")


def request_operations(query: str, limit: int = 12) -> frozenset[str]:
    """Operations named among the first ``limit`` words of a request (later words are mostly objects)."""
    operations: frozenset[str] = frozenset()
    for token in request_terms(query)[:limit]:
        operations |= VERBS.get(token, frozenset())
    return operations


def tool_operation(name: str, description: str, read_only: bool = False) -> frozenset[str]:
    """The first verb of the tool name, else the first verb of its description; with ``read`` added for a tool
    governance classes as a read (``ToolDoc.read_only``).

    A name's first verb misreads a read named by a word that is also a verb elsewhere: git_log ("Shows the commit
    logs") read as a write, as "log" is one in "log my hours", so "show the commit history" cost it the conflict
    and gave git_show the agreement (bench/NOTES-agentux21.md). The class is read only when the upstream's
    readOnlyHint is not contradicted by the tool's own name and description (``classification_derive``), or an
    admin said so. It adds ``read``, never takes an operation away: an upstream hinting read-only gains at most
    what a read verb in the name it writes gains."""
    named = _named_operation(name, description)
    return named | {READ} if read_only else named


def _named_operation(name: str, description: str) -> frozenset[str]:
    for token in split_identifier(name).split():
        if token in VERBS:
            return VERBS[token]
    for token in tokenize(description)[:8]:
        if token in VERBS:
            return VERBS[token]
    return frozenset()


def intent_adjustment(request_ops: frozenset[str], tool_ops: frozenset[str], agree: float, conflict: float) -> float:
    """+agree when the operations overlap, -conflict when both are known and disjoint, else 0."""
    if not request_ops or not tool_ops:
        return 0.0
    return agree if request_ops & tool_ops else -conflict
