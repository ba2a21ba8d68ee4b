from django.db import migrations, models

# Retention: the append-only trigger of 0005 now lets exactly one kind of DELETE through, the one
# tenants.audit.prune makes. That path sets the transaction-local `perdura.audit_prune` to its cutoff;
# the trigger accepts the deletion of a row older than that cutoff, and only if the cutoff is at least
# 30 days in the past (the shortest PERDURA_AUDIT_RETENTION_DAYS), so no code path, bug or hand-typed
# statement can remove the last month of history, and UPDATE stays refused for every row and role.
PRUNABLE = """
CREATE OR REPLACE FUNCTION tenants_auditevent_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    cutoff text := current_setting('perdura.audit_prune', true);
BEGIN
    IF TG_OP = 'DELETE' AND coalesce(cutoff, '') <> ''
            AND cutoff::timestamptz <= now() - interval '30 days'
            AND OLD.time < cutoff::timestamptz THEN
        RETURN OLD;
    END IF;
    RAISE EXCEPTION 'the audit log is append-only: % is not allowed on tenants_auditevent', TG_OP
        USING ERRCODE = 'insufficient_privilege',
              HINT = 'entries leave the log only by retention: perdura audit prune';
END;
$$;
"""
APPEND_ONLY = """
CREATE OR REPLACE FUNCTION tenants_auditevent_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'the audit log is append-only: % is not allowed on tenants_auditevent', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;
"""


def allow_pruning(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(PRUNABLE, params=None)


def forbid_pruning(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(APPEND_ONLY, params=None)


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0005_audit_log"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="auditevent",
            index=models.Index(fields=["time"], name="audit_time"),
        ),
        migrations.RunPython(allow_pruning, forbid_pruning),
    ]
