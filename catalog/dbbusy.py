"""Whether a database error means "locked or too slow right now" (SECURITY-TESTS F7): one mapping for every
database and every entry point (the MCP tools' service_busy result, the REST API's 503 service_busy).

SQLite: another connection held the lock past the busy timeout (SCOUT_SQLITE_BUSY_TIMEOUT). Postgres: a
serving connection's lock_timeout (55P03 lock_not_available) or statement_timeout (57014 query_canceled) ran
out (SCOUT_DB_LOCK_TIMEOUT, SCOUT_DB_STATEMENT_TIMEOUT).
"""

from django.db import DatabaseError

BUSY_TEXTS = ("database is locked", "database table is locked", "database is busy")
BUSY_SQLSTATES = ("55P03", "57014")


def database_busy(exc: BaseException) -> bool:
    """Whether ``exc`` means "the database is locked or too slow right now" (try again), not a bug."""
    if not isinstance(exc, DatabaseError):
        return False
    cause = exc.__cause__
    if getattr(cause, "sqlstate", None) in BUSY_SQLSTATES or getattr(cause, "pgcode", None) in BUSY_SQLSTATES:
        return True
    return any(text in str(exc).lower() for text in BUSY_TEXTS)
