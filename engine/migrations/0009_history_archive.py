# Where each archived run's history went (engine/archival/history.py): bucket, key, checksum, key version.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('engine', '0008_retention'),
        ('tenants', '0011_namespace_archival'),
    ]

    operations = [
        migrations.CreateModel(
            name='HistoryArchive',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('workflow_id', models.CharField(max_length=1000)),
                ('run_id', models.CharField(max_length=64)),
                ('close_time', models.DateTimeField()),
                ('uri', models.CharField(max_length=1024)),
                ('bucket', models.CharField(max_length=63)),
                ('key', models.CharField(max_length=1024)),
                ('sha256', models.CharField(max_length=64)),
                ('size_bytes', models.BigIntegerField()),
                ('events', models.BigIntegerField()),
                ('data_key_version', models.PositiveIntegerField()),
                ('archived_at', models.DateTimeField()),
                ('namespace', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='+', to='tenants.namespace')),
            ],
            options={
                'indexes': [models.Index(fields=['namespace', 'workflow_id', '-close_time'], name='history_archive_latest')],
                'constraints': [models.UniqueConstraint(fields=('namespace', 'workflow_id', 'run_id'), name='history_archive_run')],
            },
        ),
    ]
