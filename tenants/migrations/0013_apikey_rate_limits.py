# Per-key rate limits (tenants/quotas.py): a key's own requests per second per bucket, beside its namespaces'.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("tenants", "0012_namespace_retry_jitter"),
    ]

    operations = [
        migrations.AddField(
            model_name="apikey",
            name="rate_limits",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
