# A namespace's retention becomes a duration (the operator may set less than a day).

from datetime import timedelta

from django.db import migrations, models


def days_to_duration(apps, schema_editor):
    Namespace = apps.get_model("tenants", "Namespace")
    for namespace in Namespace.objects.only("pk", "retention_days"):
        Namespace.objects.filter(pk=namespace.pk).update(retention=timedelta(days=namespace.retention_days))


def duration_to_days(apps, schema_editor):
    Namespace = apps.get_model("tenants", "Namespace")
    for namespace in Namespace.objects.only("pk", "retention"):
        days = max(namespace.retention // timedelta(days=1), 1)
        Namespace.objects.filter(pk=namespace.pk).update(retention_days=days)


class Migration(migrations.Migration):

    dependencies = [
        ("tenants", "0007_datakey_master_key_id"),
    ]

    operations = [
        migrations.AddField(
            model_name="namespace",
            name="retention",
            field=models.DurationField(default=timedelta(days=1)),
        ),
        migrations.RunPython(days_to_duration, duration_to_days),
        migrations.RemoveField(model_name="namespace", name="retention_days"),
    ]
