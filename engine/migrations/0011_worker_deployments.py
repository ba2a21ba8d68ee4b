# Worker deployments and their versions, learned from versioned polls (engine/services/deployments.py).

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('engine', '0010_reencryption_in_shards'),
        ('tenants', '0011_namespace_archival'),
    ]

    operations = [
        migrations.CreateModel(
            name='WorkerDeployment',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('name', models.CharField(max_length=255)),
                ('created_at', models.DateTimeField()),
                ('current_build_id', models.CharField(blank=True, default='', max_length=255)),
                ('current_changed_at', models.DateTimeField(null=True)),
                ('ramping_build_id', models.CharField(blank=True, default='', max_length=255)),
                ('ramping_percentage', models.FloatField(default=0.0)),
                ('ramping_changed_at', models.DateTimeField(null=True)),
                ('ramping_percentage_changed_at', models.DateTimeField(null=True)),
                ('revision', models.BigIntegerField(default=0)),
                ('last_modifier_identity', models.CharField(blank=True, default='', max_length=1000)),
                ('namespace', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='tenants.namespace')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('namespace', 'name'), name='worker_deployment_name')],
            },
        ),
        migrations.CreateModel(
            name='WorkerDeploymentVersion',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('build_id', models.CharField(max_length=255)),
                ('created_at', models.DateTimeField()),
                ('current_since', models.DateTimeField(null=True)),
                ('ramping_since', models.DateTimeField(null=True)),
                ('routing_changed_at', models.DateTimeField(null=True)),
                ('first_activation_at', models.DateTimeField(null=True)),
                ('last_current_at', models.DateTimeField(null=True)),
                ('last_deactivation_at', models.DateTimeField(null=True)),
                ('last_poll_at', models.DateTimeField()),
                ('metadata', models.BinaryField(default=b'')),
                ('last_modifier_identity', models.CharField(blank=True, default='', max_length=1000)),
                ('deployment', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='versions', to='engine.workerdeployment')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('deployment', 'build_id'), name='worker_deployment_build_id')],
            },
        ),
        migrations.CreateModel(
            name='WorkerDeploymentTaskQueue',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('task_queue', models.CharField(max_length=1000)),
                ('deployment', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='task_queues', to='engine.workerdeployment')),
                ('namespace', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='tenants.namespace')),
            ],
            options={
                'constraints': [models.UniqueConstraint(fields=('namespace', 'task_queue', 'deployment'), name='worker_deployment_task_queue')],
            },
        ),
    ]
