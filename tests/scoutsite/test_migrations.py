"""Migrations on the tables that grow with traffic leave them writable on Postgres while an index builds."""

import io

import pytest
from django.contrib.postgres.operations import AddIndexConcurrently
from django.core.management import call_command
from django.db import connection
from django.db.migrations import AddConstraint, AddField, AddIndex, CreateModel
from django.db.migrations.loader import MigrationLoader

# Written on every search or call: a CREATE INDEX (or a column added with an index) on one of these blocks every
# insert until the index is built.
LARGE_TABLES = {
    ("governance", "auditevent"),
    ("search", "querylogentry"),
    ("search", "searchoutcome"),
    ("search", "searchevent"),
}
# Indexed with a lock before this check, and applied where Scout runs: an applied migration keeps its effect.
APPLIED_BEFORE_THE_CHECK = {
    ("governance", "0011_tenants_and_agents"),  # auditevent.tenant_scope
    ("search", "0004_query_log_tenant"),  # querylogentry.tenant
    ("search", "0009_outcome_approval_id"),  # searchoutcome.approval_id
}


def _builds_an_index_with_a_lock(operation) -> bool:
    if isinstance(operation, AddIndex):
        return not isinstance(operation, AddIndexConcurrently)
    if isinstance(operation, AddField):
        return operation.field.db_index or operation.field.unique
    return isinstance(operation, AddConstraint)


def test_no_migration_indexes_a_large_table_with_a_lock():
    locking = []
    for (app, name), migration in MigrationLoader(None, ignore_no_migrations=True).disk_migrations.items():
        created = {op.name_lower for op in migration.operations if isinstance(op, CreateModel)}
        for operation in migration.operations:
            model = getattr(operation, "model_name_lower", None)
            if (app, model) in LARGE_TABLES and model not in created and _builds_an_index_with_a_lock(operation):
                locking.append((app, name))
    assert set(locking) <= APPLIED_BEFORE_THE_CHECK, "use catalog.migration_ops.AddIndexConcurrently"


@pytest.mark.django_db(transaction=True)
def test_the_audit_approval_index_is_built_concurrently_on_postgres():
    out = io.StringIO()
    call_command("sqlmigrate", "governance", "0016", stdout=out)
    sql = out.getvalue()
    if connection.vendor == "postgresql":
        assert 'CREATE INDEX CONCURRENTLY "governance_audit_approval"' in sql
    else:
        assert 'CREATE INDEX "governance_audit_approval"' in sql
    assert "BEGIN" not in sql  # no transaction around it: CONCURRENTLY cannot run inside one
