# The desk's models move from `runs` to `desk` by state only: their tables (`runs_ticket`, `runs_handoff`,
# `runs_ticketcounter`), columns, keys, indexes and constraints stay exactly as they are, and no SQL runs
# (`manage.py sqlmigrate desk 0001` shows none). `runs` 0011 then takes them out of its own state; it depends on this
# migration, and this one on `runs` 0010 (the state it copies, and the conversation its foreign keys refer to).

import django.db.models.deletion
import django.utils.timezone
import kagent.ids
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('kagent', '0004_api_key_allowed_origins'),
        ('runs', '0010_foreign_keys_checked_in_statement'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='TicketCounter',
                    fields=[
                        ('project', models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, serialize=False, to='kagent.project')),
                        ('last_number', models.IntegerField(default=0)),
                    ],
                    options={
                        'db_table': 'runs_ticketcounter',
                    },
                ),
                migrations.CreateModel(
                    name='Handoff',
                    fields=[
                        ('id', kagent.ids.PrefixedIdField(prefix='hof', serialize=False)),
                        ('reason_type', models.CharField(max_length=30)),
                        ('summary', models.TextField()),
                        ('status', models.CharField(choices=[('open', 'Open'), ('closed', 'Closed')], default='open', max_length=10)),
                        ('assignee', models.CharField(blank=True, max_length=200)),
                        ('closed_at', models.DateTimeField(blank=True, null=True)),
                        ('tool_call_id', models.CharField(blank=True, max_length=40, null=True, unique=True)),
                        ('is_test', models.BooleanField(default=False)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('end_user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='runs.enduser')),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='handoffs', to='kagent.project')),
                        ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='runs.run')),
                        ('session', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='runs.session')),
                    ],
                    options={
                        'db_table': 'runs_handoff',
                    },
                ),
                migrations.CreateModel(
                    name='Ticket',
                    fields=[
                        ('id', kagent.ids.PrefixedIdField(prefix='tkt', serialize=False)),
                        ('number', models.IntegerField()),
                        ('title', models.CharField(max_length=200)),
                        ('description', models.TextField()),
                        ('priority', models.CharField(default='normal', max_length=10)),
                        ('resolution_attempted', models.TextField(blank=True)),
                        ('status', models.CharField(choices=[('open', 'Open'), ('closed', 'Closed')], default='open', max_length=10)),
                        ('closed_at', models.DateTimeField(blank=True, null=True)),
                        ('rate_key', models.CharField(max_length=100)),
                        ('tool_call_id', models.CharField(blank=True, max_length=40, null=True, unique=True)),
                        ('is_test', models.BooleanField(default=False)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('end_user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='runs.enduser')),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='tickets', to='kagent.project')),
                        ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='runs.run')),
                        ('session', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='runs.session')),
                    ],
                    options={
                        'db_table': 'runs_ticket',
                        'constraints': [models.UniqueConstraint(fields=('project', 'number'), name='ticket_number_unique')],
                    },
                ),
            ],
        ),
    ]
