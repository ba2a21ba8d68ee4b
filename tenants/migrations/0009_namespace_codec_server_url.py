# A namespace's codec server URL (the console's settings page; tenants/services/namespaces.py).

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0008_namespace_retention_duration"),
    ]

    operations = [
        migrations.AddField(
            model_name="namespace",
            name="codec_server_url",
            field=models.CharField(blank=True, default="", max_length=2048),
        ),
    ]
