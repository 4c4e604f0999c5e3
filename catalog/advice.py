"""What an operator does about a failed sync or connection test, read from the error it recorded.

The errors are written by ``catalog.upstream`` and ``catalog.openapi`` ("command not found: …", "environment
variable(s) not set: …"); each known kind gets its own next step, anything else the general one, followed by the step
after it where the operator reads it (``then``): on a saved server's pages "Test connection, then save and Sync now";
on Test connection's own page "test again", then save (a new server, synced when saved) or Sync now; in the log line
of a failed sync and ``manage.py catalog_sync``'s output, how to sync it again (``then_sync_again``). The advice is
fixed text: nothing of the error (upstream text, untrusted) is repeated in it."""

from catalog.choices import SYNC_FAILED_FIX, SYNC_FAILED_THEN

THEN = SYNC_FAILED_THEN
# On Test connection's page, which the operator reached from the form, with the form's entries kept.
THEN_TEST_NEW = (
    "Then Test connection again (Back to the form, below, keeps your entries); once it lists the tools, save the "
    "server: a new server is synced when saved."
)
THEN_TEST_SAVED = (
    "Then Test connection again (Back to the form, below, keeps your entries); once it lists the tools, save any "
    "change to the form and Sync now."
)


def then_sync_again(slug: str) -> str:
    """The step after the fix where no admin page is open: a log line, the command's output."""
    return f"Then sync it again: Sync now on its page in the admin, or manage.py catalog_sync {slug}."


# (words found in the error, what to do), the first that matches wins.
ADVICE = (
    (
        ("command not found",),
        "The command is not installed where Scout runs: install it on every machine that runs Scout (the web "
        "process and the Celery workers), or give its full path, e.g. /usr/local/bin/mcp-server-time.",
    ),
    (
        ("not set:",),
        "Set the environment variable(s) named in the error in the environment of every Scout process (the web "
        "process and the Celery workers) and restart them: Scout reads the value there and never stores it. Or "
        "correct the variable's name on the server's page.",
    ),
    (
        ("SCOUT_UPSTREAM_ALLOWED_HOSTS",),
        "Scout connects only to the hosts listed in SCOUT_UPSTREAM_ALLOWED_HOSTS: if the URL is right, whoever runs "
        "Scout adds its host (or network, e.g. 10.0.0.0/8, or 127.0.0.1/32 for this machine) there and restarts "
        "Scout; otherwise correct the URL.",
    ),
    (
        ("did not resolve",),
        "The host name did not resolve: check its spelling in the URL, and that the machine Scout runs on can look "
        "it up (its DNS).",
    ),
    (
        ("connection refused", "could not connect", "could not fetch"),
        "Nothing answered at that address: check that the server is running and reachable from the machine Scout "
        "runs on, and that the URL (scheme, host, port, path) is right.",
    ),
    (
        ("timed out", "HTTP timeout"),
        "The server did not answer in time: check that it is running and not overloaded (how long Scout waits: "
        "SCOUT_UPSTREAM_CONNECT_TIMEOUT, SCOUT_UPSTREAM_LIST_TIMEOUT).",
    ),
    (
        ("HTTP 401", "HTTP 403"),
        "The server refused Scout's credentials: check the variables named on the server's page hold valid ones "
        "(set in the environment of every Scout process).",
    ),
    (
        ("OpenAPI document", "the document is larger"),
        "Correct the OpenAPI document (its URL, an uploaded file or the pasted text): an OpenAPI 3.0 or 3.1 "
        "document in JSON or YAML. Preview operations on the server's page reads a saved one without syncing.",
    ),
)


def sync_failed_next(error: str, *, then: str = THEN) -> str:
    """What to do about a sync or connection test that failed with ``error`` (the general steps when unknown), and
    ``then`` the step after it on the page it is read on (a saved server's, by default)."""
    for words, advice in ADVICE:
        if any(word in error for word in words):
            return f"{advice} {then}"
    return f"{SYNC_FAILED_FIX} {then}"


def connection_test_next(*, error: str, new: bool, changed: bool) -> str:
    """The next step on Test connection's page: fix and test again after a failure, else what makes a sync import
    the tools listed (saving a new server syncs it; a saved one's changes are saved, then Sync now)."""
    if error:
        return sync_failed_next(error, then=THEN_TEST_NEW if new else THEN_TEST_SAVED)
    if new:
        return "Save the server to import them: a new server is synced when saved."
    if changed:
        return "Save your changes, then Sync now on the server's page to import them."
    return "These are the server's saved settings: Sync now on its page imports them."
