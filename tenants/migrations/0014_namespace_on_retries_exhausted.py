# The namespace's default for activities whose retries are exhausted (engine/history/parking.py).

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0013_apikey_rate_limits'),
    ]

    operations = [
        migrations.AddField(
            model_name='namespace',
            name='on_retries_exhausted',
            field=models.CharField(db_default='fail', default='fail', max_length=8),
        ),
    ]
