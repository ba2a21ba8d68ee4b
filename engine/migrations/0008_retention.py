# Retention rows: one per closed run, due at close + the namespace's retention (engine/shards/retention.py).
# Runs that closed before this migration get theirs here (the backfill), due at their close time plus
# their namespace's retention now; the engine writes the row of every run closing afterwards.

from datetime import timedelta

import django.db.models.deletion
from django.db import migrations, models


BACKFILL_POSTGRES = """
INSERT INTO engine_retention (shard, due_at, execution_id, namespace_id, step, failures, last_error)
SELECT e.shard, e.close_time + n.retention, e.id, e.namespace_id, 0, 0, ''
FROM engine_execution e JOIN tenants_namespace n ON n.id = e.namespace_id
WHERE e.close_time IS NOT NULL
ON CONFLICT (execution_id) DO NOTHING
"""


def backfill(apps, schema_editor):
    """A retention row for every closed run without one (idempotent)."""
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKFILL_POSTGRES)
        return
    # SQLite (`perdura dev`): the same in Python, in chunks.
    Execution = apps.get_model("engine", "Execution")
    Namespace = apps.get_model("tenants", "Namespace")
    Retention = apps.get_model("engine", "Retention")
    retentions = dict(Namespace.objects.values_list("id", "retention"))
    closed = Execution.objects.filter(close_time__isnull=False).exclude(
        pk__in=Retention.objects.values("execution_id")
    )
    batch = []
    for e in closed.only("pk", "shard", "namespace_id", "close_time").iterator(chunk_size=1000):
        retention = retentions.get(e.namespace_id) or timedelta(days=1)
        batch.append(
            Retention(
                shard=e.shard,
                due_at=e.close_time + retention,
                execution_id=e.pk,
                namespace_id=e.namespace_id,
            )
        )
        if len(batch) == 1000:
            Retention.objects.bulk_create(batch, ignore_conflicts=True)
            batch = []
    Retention.objects.bulk_create(batch, ignore_conflicts=True)


class Migration(migrations.Migration):

    dependencies = [
        ('engine', '0007_batch_operations'),
        ('tenants', '0008_namespace_retention_duration'),
    ]

    operations = [
        migrations.CreateModel(
            name='Retention',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('failures', models.IntegerField(db_default=0, default=0)),
                ('last_error', models.TextField(db_default='', default='')),
                ('parked_at', models.DateTimeField(null=True)),
                ('shard', models.SmallIntegerField()),
                ('due_at', models.DateTimeField()),
                ('step', models.SmallIntegerField(db_default=0, default=0)),
                ('execution', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, related_name='+', to='engine.execution')),
                ('namespace', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.namespace')),
            ],
            options={
                'indexes': [models.Index(condition=models.Q(('parked_at__isnull', True)), fields=['shard', 'due_at'], name='retention_live_due'), models.Index(condition=models.Q(('parked_at__isnull', False)), fields=['parked_at'], name='retention_parked'), models.Index(condition=models.Q(('parked_at__isnull', True)), fields=['namespace', 'due_at'], name='retention_by_namespace')],
            },
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
