# The namespace's default retry jitter fraction (engine/history/retry_jitter.py); 0 is off.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0011_namespace_archival'),
    ]

    operations = [
        migrations.AddField(
            model_name='namespace',
            name='retry_jitter',
            field=models.FloatField(db_default=0.0, default=0.0),
        ),
    ]
