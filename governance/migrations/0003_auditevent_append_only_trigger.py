"""On Postgres, refuse UPDATE and DELETE on the audit table in the database itself (defence in depth beside
the model's guards). SQLite is left alone: its test flush deletes rows, and it is the single-user default."""

from django.db import migrations

CREATE = """
CREATE OR REPLACE FUNCTION governance_auditevent_append_only() RETURNS trigger AS $$
BEGIN
    RAISE EXCEPTION 'governance_auditevent is append-only (% refused)', TG_OP;
END;
$$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS governance_auditevent_append_only ON governance_auditevent;
CREATE TRIGGER governance_auditevent_append_only
    BEFORE UPDATE OR DELETE ON governance_auditevent
    FOR EACH ROW EXECUTE FUNCTION governance_auditevent_append_only();
"""

DROP = """
DROP TRIGGER IF EXISTS governance_auditevent_append_only ON governance_auditevent;
DROP FUNCTION IF EXISTS governance_auditevent_append_only();
"""


def create(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(CREATE, params=None)


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(DROP, params=None)


class Migration(migrations.Migration):
    dependencies = [("governance", "0002_seed_risk_classes")]

    operations = [migrations.RunPython(create, drop)]
