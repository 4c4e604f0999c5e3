"""Statistics on the query log's searched text, on PostgreSQL 14 and later (nothing elsewhere).

The admin's search of the log (``?q=thing``) filters ``UPPER(query) LIKE UPPER('%thing%')``. Postgres keeps no
statistics on that expression and guesses a few hundred matching rows, so it reads every match and sorts them (0.4 s
at 100k searches that all matched) instead of walking the ``created_at`` index backwards to the first page (1 ms).
With statistics on ``UPPER(query)``, gathered by ANALYZE (autovacuum runs it as the log grows), the guess follows the
words searched for: a common word walks the index, a rare one reads the table once.
"""

from django.db import migrations

NAME = "search_qlog_query_upper"


def create(apps, schema_editor) -> None:
    connection = schema_editor.connection
    if connection.vendor != "postgresql" or connection.pg_version < 140000:  # expression statistics: PostgreSQL 14
        return
    schema_editor.execute(f"CREATE STATISTICS IF NOT EXISTS {NAME} ON (UPPER(query)) FROM search_querylogentry")


def drop(apps, schema_editor) -> None:
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP STATISTICS IF EXISTS {NAME}")


class Migration(migrations.Migration):
    dependencies = [
        ("search", "0010_learned_confirmation_counts"),
    ]

    operations = [migrations.RunPython(create, drop, elidable=False)]
