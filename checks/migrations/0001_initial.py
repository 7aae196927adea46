# Checks and check runs move from `agents` to `checks` by state only: their tables (`agents_check`,
# `agents_checkrun`) stay exactly as they are, and no SQL runs; `agents` 0007 then takes them out of its state.

import django.db.models.deletion
import django.utils.timezone
import kagent.ids
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('agents', '0006_checks'),
        ('kagent', '0005_invitation'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='Check',
                    fields=[
                        ('id', kagent.ids.PrefixedIdField(prefix='chk', serialize=False)),
                        ('name', models.CharField(max_length=200)),
                        ('input', models.JSONField()),
                        ('end_user', models.JSONField(blank=True, null=True)),
                        ('client_outputs', models.JSONField(default=dict)),
                        ('expect', models.JSONField(default=dict)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='checks', to='agents.agent')),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='checks', to='kagent.project')),
                    ],
                    options={
                        'db_table': 'agents_check',
                    },
                ),
                migrations.CreateModel(
                    name='CheckRun',
                    fields=[
                        ('id', kagent.ids.PrefixedIdField(prefix='chkr', serialize=False)),
                        ('version', models.IntegerField(blank=True, null=True)),
                        ('status', models.CharField(choices=[('running', 'Running'), ('passed', 'Passed'), ('failed', 'Failed')], default='running', max_length=10)),
                        ('results', models.JSONField(default=list)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('finished_at', models.DateTimeField(blank=True, null=True)),
                        ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='check_runs', to='agents.agent')),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='check_runs', to='kagent.project')),
                    ],
                    options={
                        'db_table': 'agents_checkrun',
                    },
                ),
            ],
        ),
    ]
