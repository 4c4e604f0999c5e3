"""Migration operations for tables that grow large (audit events, the query log, search outcomes).

A plain ``AddIndex`` on Postgres runs CREATE INDEX, which blocks every insert into the table until the index is
built: minutes on a big audit table, while each search and call waits on its audit row. Index such a table with
``AddIndexConcurrently`` instead, in a migration with ``atomic = False`` (tests/scoutsite/test_migrations.py
checks the large tables).
"""

from django.contrib.postgres.operations import AddIndexConcurrently as PostgresAddIndexConcurrently
from django.db.migrations import AddIndex


class AddIndexConcurrently(PostgresAddIndexConcurrently):
    """CREATE INDEX CONCURRENTLY on Postgres (the table stays writable while the index builds); a plain
    ``AddIndex`` elsewhere (SQLite has no such option, and one writer at a time anyway)."""

    def database_forwards(self, app_label, schema_editor, from_state, to_state) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_forwards(app_label, schema_editor, from_state, to_state)
        else:
            AddIndex.database_forwards(self, app_label, schema_editor, from_state, to_state)

    def database_backwards(self, app_label, schema_editor, from_state, to_state) -> None:
        if schema_editor.connection.vendor == "postgresql":
            super().database_backwards(app_label, schema_editor, from_state, to_state)
        else:
            AddIndex.database_backwards(self, app_label, schema_editor, from_state, to_state)
