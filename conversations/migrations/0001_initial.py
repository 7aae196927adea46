# The conversation's models move from `runs` to `conversations` by state only: their tables (`runs_enduser`,
# `runs_session`, `runs_segment`, `runs_message`, `runs_sessionevent`), columns, keys, indexes and constraints stay
# exactly as they are, and no SQL runs. `desk` 0002 and `runs` 0018 then point their foreign keys here and take the
# models out of `runs`' state (as `desk` 0001 / `runs` 0011 moved the desk).

import django.db.models.deletion
import django.utils.timezone
import kagent.ids
from django.db import migrations, models


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ('agents', '0006_checks'),
        ('kagent', '0005_invitation'),
        ('runs', '0017_quoted_tool_call_steps'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.CreateModel(
                    name='EndUser',
                    fields=[
                        ('id', kagent.ids.PrefixedIdField(prefix='eu', serialize=False)),
                        ('external_id', models.CharField(max_length=255)),
                        ('traits', models.JSONField(default=dict)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('updated_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='end_users', to='kagent.project')),
                    ],
                    options={
                        'db_table': 'runs_enduser',
                    },
                ),
                migrations.CreateModel(
                    name='Session',
                    fields=[
                        ('id', kagent.ids.PrefixedIdField(prefix='ses', serialize=False)),
                        ('metadata', models.JSONField(default=dict)),
                        ('is_test', models.BooleanField(default=False)),
                        ('status', models.CharField(choices=[('open', 'Open'), ('handed_off', 'Handed Off'), ('closed', 'Closed')], default='open', max_length=12)),
                        ('flagged', models.BooleanField(default=False)),
                        ('flag_reason', models.CharField(blank=True, max_length=500)),
                        ('flag_urgency', models.CharField(blank=True, max_length=10)),
                        ('flagged_at', models.DateTimeField(blank=True, null=True)),
                        ('handed_off_at', models.DateTimeField(blank=True, null=True)),
                        ('waiting_since', models.DateTimeField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('last_activity_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('agent', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='sessions', to='agents.agent')),
                        ('created_by_key', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='kagent.apikey')),
                        ('end_user', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='sessions', to='conversations.enduser')),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='sessions', to='kagent.project')),
                    ],
                    options={
                        'db_table': 'runs_session',
                    },
                ),
                migrations.CreateModel(
                    name='Segment',
                    fields=[
                        ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                        ('number', models.IntegerField()),
                        ('version_number', models.IntegerField(blank=True, null=True)),
                        ('tool_set', models.JSONField(default=list)),
                        ('started_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('version', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='agents.agentversion')),
                        ('session', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='segments', to='conversations.session')),
                    ],
                    options={
                        'db_table': 'runs_segment',
                    },
                ),
                migrations.CreateModel(
                    name='Message',
                    fields=[
                        ('id', kagent.ids.PrefixedIdField(prefix='msg', serialize=False)),
                        ('role', models.CharField(choices=[('user', 'User'), ('assistant', 'Assistant'), ('team', 'Team')], max_length=10)),
                        ('content', models.TextField()),
                        ('author', models.CharField(blank=True, db_default='', default='', max_length=100)),
                        ('unverified_claims', models.JSONField(blank=True, db_default=models.Value([], output_field=models.JSONField()), default=list)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('project', models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='kagent.project')),
                        ('run', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='runs.run')),
                        ('session', models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.CASCADE, related_name='messages', to='conversations.session')),
                    ],
                    options={
                        'db_table': 'runs_message',
                    },
                ),
                migrations.CreateModel(
                    name='SessionEvent',
                    fields=[
                        ('id', models.BigAutoField(primary_key=True, serialize=False)),
                        ('type', models.CharField(choices=[('session.message.created', 'Message Created'), ('session.updated', 'Updated')], max_length=30)),
                        ('ref', models.CharField(blank=True, db_default='', default='', max_length=40)),
                        ('data', models.JSONField(blank=True, null=True)),
                        ('created_at', models.DateTimeField(default=django.utils.timezone.now)),
                        ('session', models.ForeignKey(db_index=False, on_delete=django.db.models.deletion.CASCADE, related_name='events', to='conversations.session')),
                    ],
                    options={
                        'db_table': 'runs_sessionevent',
                    },
                ),
                migrations.AddConstraint(
                    model_name='enduser',
                    constraint=models.UniqueConstraint(fields=('project', 'external_id'), name='end_user_unique'),
                ),
                migrations.AddIndex(
                    model_name='session',
                    index=models.Index(condition=models.Q(('status', 'handed_off')), fields=['project', 'waiting_since'], name='session_team_inbox'),
                ),
                migrations.AddConstraint(
                    model_name='segment',
                    constraint=models.UniqueConstraint(fields=('session', 'number'), name='segment_number_unique'),
                ),
                migrations.AddIndex(
                    model_name='sessionevent',
                    index=models.Index(fields=['session', 'id'], name='session_event_order'),
                ),
            ],
        ),
    ]
