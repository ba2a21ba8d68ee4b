import uuid

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0009_namespace_codec_server_url'),
    ]

    operations = [
        migrations.CreateModel(
            name='SubjectKey',
            fields=[
                ('id', models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                ('subject', models.CharField(max_length=2048)),
                ('namespace_key_version', models.PositiveIntegerField()),
                ('wrapped_key', models.BinaryField()),
                ('created_at', models.DateTimeField()),
                ('erased_at', models.DateTimeField(blank=True, null=True)),
                (
                    'namespace',
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name='subject_keys',
                        to='tenants.namespace',
                    ),
                ),
            ],
            options={
                'constraints': [
                    models.UniqueConstraint(
                        condition=models.Q(('erased_at__isnull', True)),
                        fields=('namespace', 'subject'),
                        name='subjectkey_one_live_key',
                    )
                ],
            },
        ),
    ]
