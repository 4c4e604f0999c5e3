"""Whether a database error means "locked or too slow right now" (SECURITY-TESTS F7): one mapping for every
database and every entry point (the MCP tools' service_busy result, the REST API's 503 service_busy).

SQLite: another connection held the lock past the busy timeout (SCOUT_SQLITE_BUSY_TIMEOUT). Postgres: a
serving connection's lock_timeout (55P03 lock_not_available) or statement_timeout (57014 query_canceled) ran
out (SCOUT_DB_LOCK_TIMEOUT, SCOUT_DB_STATEMENT_TIMEOUT).

Either database: no connection to be had right now (Postgres out of connection slots, "too many connections", or
not answering). It was a bug's 500 and no retry: an agent read "Error executing tool execute_tool", and a call that
had reached its upstream server lost its audit row instead of waiting for the database (opsux3, a script holding
every connection the role may open).
"""

from django.db import DatabaseError

BUSY_TEXTS = (
    "database is locked",
    "database table is locked",
    "database is busy",
    # Postgres refusing or failing a new connection (its SQLSTATE is not known before a session exists).
    "too many connections",
    "remaining connection slots are reserved",
    "the database system is starting up",
    "connection refused",
)
BUSY_SQLSTATES = ("55P03", "57014", "53300", "57P03")


def database_busy(exc: BaseException) -> bool:
    """Whether ``exc`` means "the database is locked or too slow right now" (try again), not a bug."""
    if not isinstance(exc, DatabaseError):
        return False
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) in BUSY_SQLSTATES or getattr(cause, "pgcode", None) in BUSY_SQLSTATES:
        return True
    return any(text in str(exc).lower() for text in BUSY_TEXTS)
