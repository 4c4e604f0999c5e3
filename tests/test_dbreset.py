"""tests/dbreset.py, the reset between transactional tests, leaves the tables as Django's flush + post_migrate."""

import pytest
from django.apps import apps
from django.contrib.auth.models import Group, Permission
from django.contrib.contenttypes.models import ContentType
from django.core.management import call_command
from django.utils import timezone

from governance.models import AuditEvent, PolicyVersion, RiskClass, VisibilityVersion
from tests.dbreset import DatabaseReset


def _flush() -> None:
    """Django's own: what TransactionTestCase's teardown runs."""
    call_command("flush", verbosity=0, interactive=False, reset_sequences=False)


def _tables() -> dict[str, list[tuple]]:
    """Every non-empty table, its rows without surrogate keys: a foreign key reads as the row it points to."""
    memo: dict[tuple, tuple] = {}

    def natural(obj) -> tuple:
        key = (type(obj), obj.pk)
        if key not in memo:
            values = []
            for field in type(obj)._meta.concrete_fields:
                if field.primary_key and not field.is_relation:
                    continue
                if field.is_relation:
                    target = getattr(obj, field.name)
                    values.append((field.column, None if target is None else natural(target)))
                else:
                    values.append((field.column, field.value_from_object(obj)))
            memo[key] = tuple(values)
        return memo[key]

    tables = {}
    for model in apps.get_models(include_auto_created=True):
        rows = sorted((natural(obj) for obj in model._base_manager.all()), key=repr)
        if rows:
            tables[model._meta.db_table] = rows
    return tables


def _without(tables: dict[str, list[tuple]], columns: set[tuple[str, str]]) -> dict[str, list[tuple]]:
    return {
        table: sorted(
            (tuple(item for item in row if (table, item[0]) not in columns) for row in rows),
            key=repr,
        )
        for table, rows in tables.items()
    }


def _changing(first: dict[str, list[tuple]], second: dict[str, list[tuple]]) -> set[tuple[str, str]]:
    """The columns whose values differ between two states with the same rows (what each flush makes anew)."""
    changing = set()
    for table in first.keys() & second.keys():
        for column, _ in first[table][0]:
            values = [sorted(repr(dict(row)[column]) for row in state[table]) for state in (first, second)]
            if values[0] != values[1]:
                changing.add((table, column))
    return changing


@pytest.mark.django_db(transaction=True)
def test_the_reset_leaves_what_djangos_flush_and_post_migrate_leave():
    _flush()
    flushed = _tables()
    token = VisibilityVersion.objects.get().token
    reset = DatabaseReset("default")
    reset.capture()
    # Rows in plain tables, in the audit table (append-only on Postgres), and changes to every kind of row
    # post_migrate re-creates: deleted, renamed, added to, taken from.
    user = Group.objects.create(name="extra").user_set.create(username="someone")
    Group.objects.get(name="Curators").permissions.clear()
    Permission.objects.filter(codename="view_tool").update(name="renamed")
    ContentType.objects.create(app_label="gone", model="gone")
    RiskClass.objects.order_by("pk").first().delete()
    PolicyVersion.objects.create(number=99, reason="a test's", created_by=user)
    AuditEvent.objects.create(created_at=timezone.now(), event_type="tool_search", outcome="ok", user=user)
    assert _tables() != flushed

    assert reset.restore()
    after_reset = _tables()
    assert VisibilityVersion.objects.get().token != token  # a new one, as a flush's post_migrate writes make
    _flush()
    after_flush = _tables()

    # Two flushes differ only in what they make anew: the policy version's time and the visibility token.
    changing = _changing(flushed, after_flush)
    assert changing <= {("governance_policyversion", "created_at"), ("governance_visibilityversion", "token")}
    assert after_reset.keys() == after_flush.keys() == flushed.keys()
    assert _without(after_reset, changing | {("governance_visibilityversion", "token")}) == _without(
        after_flush, changing | {("governance_visibilityversion", "token")}
    )


@pytest.mark.django_db(transaction=True)
def test_the_reset_leaves_it_to_djangos_flush_when_the_tables_changed():
    reset = DatabaseReset("default")
    reset.capture()
    reset.tables = reset.tables | {"a_table_migrate_dropped"}
    assert not reset.restore()
