from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("engine", "0015_deployment_managers"),
    ]

    operations = [
        migrations.AddField(
            model_name="execution",
            name="queries_parked",
            field=models.BooleanField(db_default=False, default=False),
        ),
        # Queries parked while the server was upgraded: their runs' flags go up.
        migrations.RunSQL(
            "UPDATE engine_execution SET queries_parked = TRUE WHERE id IN "
            "(SELECT execution_id FROM engine_task WHERE kind = 3 AND task_queue = '')",
            migrations.RunSQL.noop,
        ),
    ]
