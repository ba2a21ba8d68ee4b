# The archive index (visibility.models.ArchivedVisibilityRecord): closed runs' records kept after retention.

import django.db.models.deletion
import visibility.models
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('tenants', '0011_namespace_archival'),
        ('visibility', '0003_slot_columns'),
    ]

    operations = [
        migrations.CreateModel(
            name='ArchivedVisibilityRecord',
            fields=[
                ('workflow_id', models.CharField(max_length=1000)),
                ('run_id', models.CharField(max_length=64)),
                ('workflow_type', models.CharField(max_length=1000)),
                ('task_queue', models.CharField(max_length=1000)),
                ('status', models.SmallIntegerField()),
                ('start_time', models.BigIntegerField()),
                ('execution_time', models.BigIntegerField()),
                ('close_time', models.BigIntegerField(null=True)),
                ('close_sort', models.BigIntegerField()),
                ('execution_duration', models.BigIntegerField(null=True)),
                ('history_length', models.BigIntegerField(default=0)),
                ('history_size_bytes', models.BigIntegerField(default=0)),
                ('state_transition_count', models.BigIntegerField(default=0)),
                ('parent_workflow_id', models.CharField(max_length=1000, null=True)),
                ('parent_run_id', models.CharField(max_length=64, null=True)),
                ('root_workflow_id', models.CharField(max_length=1000)),
                ('root_run_id', models.CharField(max_length=64)),
                ('first_run_id', models.CharField(default='', max_length=64)),
                ('memo', models.BinaryField(default=b'')),
                ('search_attributes', models.BinaryField(default=b'')),
                ('custom', models.JSONField(default=dict)),
                ('keyword01', visibility.models.CodePointTextField(null=True)),
                ('keyword02', visibility.models.CodePointTextField(null=True)),
                ('keyword03', visibility.models.CodePointTextField(null=True)),
                ('keyword04', visibility.models.CodePointTextField(null=True)),
                ('keyword05', visibility.models.CodePointTextField(null=True)),
                ('keyword06', visibility.models.CodePointTextField(null=True)),
                ('keyword07', visibility.models.CodePointTextField(null=True)),
                ('keyword08', visibility.models.CodePointTextField(null=True)),
                ('keyword09', visibility.models.CodePointTextField(null=True)),
                ('keyword10', visibility.models.CodePointTextField(null=True)),
                ('int01', models.BigIntegerField(null=True)),
                ('int02', models.BigIntegerField(null=True)),
                ('int03', models.BigIntegerField(null=True)),
                ('double01', models.FloatField(null=True)),
                ('double02', models.FloatField(null=True)),
                ('double03', models.FloatField(null=True)),
                ('bool01', models.BooleanField(null=True)),
                ('bool02', models.BooleanField(null=True)),
                ('bool03', models.BooleanField(null=True)),
                ('datetime01', models.BigIntegerField(null=True)),
                ('datetime02', models.BigIntegerField(null=True)),
                ('datetime03', models.BigIntegerField(null=True)),
                ('execution_id', models.BigIntegerField(primary_key=True, serialize=False)),
                ('uri', models.CharField(default='', max_length=1024)),
                ('namespace', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, to='tenants.namespace')),
            ],
            options={
                'indexes': [models.Index(fields=['namespace', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_by_order'), models.Index(fields=['namespace', 'workflow_id'], name='vis_arch_by_workflow_id'), models.Index(fields=['namespace', 'workflow_type', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_type_order'), models.Index(fields=['namespace', 'status', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_status_order'), models.Index(fields=['namespace', 'run_id'], name='vis_arch_by_run_id'), models.Index(condition=models.Q(('keyword01__isnull', False)), fields=['namespace', 'keyword01', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_keyword01'), models.Index(condition=models.Q(('keyword02__isnull', False)), fields=['namespace', 'keyword02', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_keyword02'), models.Index(condition=models.Q(('keyword03__isnull', False)), fields=['namespace', 'keyword03', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_keyword03'), models.Index(condition=models.Q(('keyword04__isnull', False)), fields=['namespace', 'keyword04', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_keyword04'), models.Index(condition=models.Q(('keyword05__isnull', False)), fields=['namespace', 'keyword05', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_keyword05'), models.Index(condition=models.Q(('keyword06__isnull', False)), fields=['namespace', 'keyword06', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_keyword06'), models.Index(condition=models.Q(('keyword07__isnull', False)), fields=['namespace', 'keyword07', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_keyword07'), models.Index(condition=models.Q(('keyword08__isnull', False)), fields=['namespace', 'keyword08', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_keyword08'), models.Index(condition=models.Q(('keyword09__isnull', False)), fields=['namespace', 'keyword09', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_keyword09'), models.Index(condition=models.Q(('keyword10__isnull', False)), fields=['namespace', 'keyword10', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_keyword10'), models.Index(condition=models.Q(('int01__isnull', False)), fields=['namespace', 'int01', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_int01'), models.Index(condition=models.Q(('int02__isnull', False)), fields=['namespace', 'int02', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_int02'), models.Index(condition=models.Q(('int03__isnull', False)), fields=['namespace', 'int03', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_int03'), models.Index(condition=models.Q(('double01__isnull', False)), fields=['namespace', 'double01', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_double01'), models.Index(condition=models.Q(('double02__isnull', False)), fields=['namespace', 'double02', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_double02'), models.Index(condition=models.Q(('double03__isnull', False)), fields=['namespace', 'double03', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_double03'), models.Index(condition=models.Q(('bool01__isnull', False)), fields=['namespace', 'bool01', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_bool01'), models.Index(condition=models.Q(('bool02__isnull', False)), fields=['namespace', 'bool02', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_bool02'), models.Index(condition=models.Q(('bool03__isnull', False)), fields=['namespace', 'bool03', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_bool03'), models.Index(condition=models.Q(('datetime01__isnull', False)), fields=['namespace', 'datetime01', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_datetime01'), models.Index(condition=models.Q(('datetime02__isnull', False)), fields=['namespace', 'datetime02', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_datetime02'), models.Index(condition=models.Q(('datetime03__isnull', False)), fields=['namespace', 'datetime03', '-close_sort', '-start_time', '-execution_id'], name='vis_arch_slot_datetime03')],
            },
        ),
    ]
