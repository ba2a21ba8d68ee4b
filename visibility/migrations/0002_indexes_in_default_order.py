# Indexes that end in the whole default order (close_sort, start_time, execution desc), so a filter on one
# of these columns and the default order, or its page token, are one index range scan (see README, Visibility).

from django.db import migrations, models

ORDER = ["-close_sort", "-start_time", "-execution"]


class Migration(migrations.Migration):

    dependencies = [
        ("visibility", "0001_initial"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="visibilityrecord",
            index=models.Index(fields=["namespace", "workflow_type", *ORDER], name="vis_type_order"),
        ),
        migrations.AddIndex(
            model_name="visibilityrecord",
            index=models.Index(fields=["namespace", "status", *ORDER], name="vis_status_order"),
        ),
        migrations.AddIndex(
            model_name="visibilityrecord",
            index=models.Index(fields=["namespace", "task_queue", *ORDER], name="vis_queue_order"),
        ),
        migrations.AddIndex(
            model_name="visibilityrecord",
            index=models.Index(fields=["namespace", "-start_time", "-execution"], name="vis_start_order"),
        ),
        migrations.RemoveIndex(model_name="visibilityrecord", name="vis_by_type"),
        migrations.RemoveIndex(model_name="visibilityrecord", name="vis_by_status"),
        migrations.RemoveIndex(model_name="visibilityrecord", name="vis_by_task_queue"),
        migrations.RemoveIndex(model_name="visibilityrecord", name="vis_by_start_time"),
    ]
