# Whether a namespace has ever started a standalone activity (visibility.selectors reads it), set for the
# namespaces that already have one.

from django.db import migrations, models

ACTIVITY_PREFIX = "\x1fstandalone-activity\x1f"
"""visibility.divisions.ACTIVITY_PREFIX when this migration was written."""


def backfill(apps, schema_editor):
    Namespace = apps.get_model("tenants", "Namespace")
    Execution = apps.get_model("engine", "Execution")
    used = Execution.objects.filter(workflow_id__startswith=ACTIVITY_PREFIX).values("namespace_id").distinct()
    Namespace.objects.filter(id__in=used).update(has_standalone_activities=True)


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0014_namespace_on_retries_exhausted'),
        ('engine', '0012_shard_pass_time'),
    ]

    operations = [
        migrations.AddField(
            model_name='namespace',
            name='has_standalone_activities',
            field=models.BooleanField(db_default=False, default=False),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
