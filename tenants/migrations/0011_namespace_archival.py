# Archival settings per namespace (tenants/archival.py): history and visibility, each a state and an s3:// URI.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0010_subject_keys'),
    ]

    operations = [
        migrations.AddField(
            model_name='namespace',
            name='history_archival_state',
            field=models.SmallIntegerField(db_default=1, default=1),
        ),
        migrations.AddField(
            model_name='namespace',
            name='history_archival_uri',
            field=models.CharField(blank=True, db_default='', default='', max_length=1024),
        ),
        migrations.AddField(
            model_name='namespace',
            name='visibility_archival_state',
            field=models.SmallIntegerField(db_default=1, default=1),
        ),
        migrations.AddField(
            model_name='namespace',
            name='visibility_archival_uri',
            field=models.CharField(blank=True, db_default='', default='', max_length=1024),
        ),
    ]
