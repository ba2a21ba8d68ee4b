# The status chips' count (`GROUP BY ExecutionStatus` of a namespace's workflows) as an index-only scan.
#
# Workflow filters leave standalone activities' host runs out with `NOT (workflow_id LIKE <prefix>%)`
# (visibility.query.divisions). workflow_id is in no index that leads with the namespace and status, so
# the count read the whole table's rows: 309 ms for a million runs, where the index-only count had been
# about 100 ms. This partial index carries that very condition, so the planner proves the count's rows
# are all in it and never visits the table (67 ms). Postgres only: `perdura dev` on SQLite is not built
# for millions of runs, and SQLite compiles the condition with a bound substring it cannot match.

from django.db import migrations

from visibility.divisions import ACTIVITY_PREFIX

NAME = "vis_workflow_status"


def _pattern() -> str:
    escaped = ACTIVITY_PREFIX.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    # Doubled %: the statement goes through the driver's placeholder parsing.
    return (escaped.replace("'", "''") + "%").replace("%", "%%")


def create(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    schema_editor.execute(
        f"CREATE INDEX IF NOT EXISTS {NAME} ON visibility_visibilityrecord (namespace_id, status) "
        f"WHERE workflow_id IS NOT NULL AND NOT (workflow_id LIKE '{_pattern()}')"
    )


def drop(apps, schema_editor):
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(f"DROP INDEX IF EXISTS {NAME}")


class Migration(migrations.Migration):
    dependencies = [
        ("visibility", "0004_archived_visibility_records"),
    ]

    operations = [
        migrations.RunPython(create, drop),
    ]
