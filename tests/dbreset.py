"""What a transactional test's teardown leaves in the database: Django's flush + post_migrate, for less.

Django's ``TransactionTestCase`` empties every table (TRUNCATE on Postgres) and re-runs ``post_migrate``, which
re-creates the content types, the permissions, the role groups and their permissions, the seeded risk classes, the
first policy version and the visibility row (django.contrib.auth/contenttypes, governance.apps). Some 660 tests pay
it. Here the first such teardown of a session runs Django's flush and keeps the rows it left (the baseline); every
later one, in one transaction, deletes every row of the other tables, puts back any baseline table whose rows
differ from the kept ones, and gives the visibility row a new random token, as post_migrate's writes would
(caches keyed by the old token must not be read). tests/test_db_reset.py checks the result against Django's.

What differs from Django's flush: the re-created rows keep their baseline primary keys and timestamps instead of
taking new ones. Anything it cannot reproduce (the set of tables changed: a test migrated) falls back to Django's.
"""

import uuid

from django.db import connections, transaction

# Columns whose value a flush + post_migrate makes anew each time: not compared, and rewritten on every reset.
FRESH = {("governance_visibilityversion", "token"): lambda: uuid.uuid4().hex}


class DatabaseReset:
    """The reset of one database alias."""

    def __init__(self, alias: str) -> None:
        self.alias = alias
        self.tables: set[str] | None = None  # every table a flush empties, from the baseline capture
        # table: (its columns, the query of its compared columns, its rows, their compared columns)
        self.kept: dict[str, tuple[list[str], str, list[tuple], list[tuple]]] = {}
        self.statements: list[str] = []

    @property
    def connection(self):
        return connections[self.alias]

    def _table_names(self) -> set[str]:
        # What Django's flush empties (django.core.management.sql.sql_flush).
        return set(self.connection.introspection.django_table_names(only_existing=True, include_views=False))

    def _superuser(self) -> bool:
        if self.connection.vendor != "postgresql":
            return False
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT rolsuper FROM pg_roles WHERE rolname = current_user")
            return bool(cursor.fetchone()[0])

    def _triggered(self) -> set[str]:
        if self.connection.vendor != "postgresql":
            return set()
        with self.connection.cursor() as cursor:
            cursor.execute("SELECT DISTINCT tgrelid::regclass::text FROM pg_trigger WHERE NOT tgisinternal")
            return {row[0] for row in cursor.fetchall()}

    def _select(self, table: str) -> tuple[list[str], str]:
        quote = self.connection.ops.quote_name
        with self.connection.cursor() as cursor:
            columns = [column.name for column in self.connection.introspection.get_table_description(cursor, table)]
            key = self.connection.introspection.get_primary_key_column(cursor, table)
        order = quote(key) if key else ", ".join(quote(column) for column in columns)
        compared = ", ".join(quote(column) for column in columns if (table, column) not in FRESH)
        return columns, f"SELECT {compared} FROM {quote(table)} ORDER BY {order}"

    def capture(self) -> None:
        """Keep what the database holds now (right after Django's flush + post_migrate) as the baseline."""
        quote = self.connection.ops.quote_name
        self.tables = self._table_names()
        self.kept = {}
        with self.connection.cursor() as cursor:
            for table in sorted(self.tables):
                cursor.execute(f"SELECT 1 FROM {quote(table)} LIMIT 1")
                if cursor.fetchone() is None:
                    continue
                columns, select = self._select(table)
                cursor.execute(f"SELECT * FROM {quote(table)}")
                full = [tuple(row) for row in cursor.fetchall()]
                cursor.execute(select)
                self.kept[table] = (columns, select, full, [tuple(row) for row in cursor.fetchall()])
        replica = self._superuser()
        triggered = set() if replica else self._triggered()
        # Under session_replication_role = replica neither foreign keys nor the audit table's append-only
        # trigger fire (a superuser: CI's role); otherwise the keys are deferred to the commit (any order) and a
        # table with a trigger that refuses DELETE is truncated.
        self.statements = ["SET LOCAL session_replication_role = replica"] if replica else []
        for table in sorted(self.tables - self.kept.keys()):
            verb = "TRUNCATE" if table in triggered else "DELETE FROM"
            self.statements.append(f"{verb} {quote(table)}")

    def restore(self) -> bool:
        """Leave the database as the baseline, with fresh FRESH values; False (nothing done) when it cannot."""
        if self.tables is None or self._table_names() != self.tables:
            return False
        quote = self.connection.ops.quote_name
        with transaction.atomic(using=self.alias, savepoint=False), self.connection.cursor() as cursor:
            if self.connection.vendor == "postgresql":
                cursor.execute(";\n".join(self.statements))  # one round trip
            else:
                for statement in self.statements:
                    cursor.execute(statement)
            for table, (columns, select, full, compared) in self.kept.items():
                cursor.execute(select)
                if [tuple(row) for row in cursor.fetchall()] == compared:
                    continue
                cursor.execute(f"DELETE FROM {quote(table)}")
                names = ", ".join(quote(column) for column in columns)
                marks = ", ".join(["%s"] * len(columns))
                cursor.executemany(f"INSERT INTO {quote(table)} ({names}) VALUES ({marks})", full)
            for (table, column), fresh in FRESH.items():
                if table in self.kept:
                    cursor.execute(f"UPDATE {quote(table)} SET {quote(column)} = %s", [fresh()])
        # As post_migrate's create_contenttypes does: a content type a test cached may be gone.
        from django.contrib.contenttypes.models import ContentType

        ContentType.objects.clear_cache()
        return True
