# The conversation's models now belong to `conversations` (conversations/migrations/0001, which this depends on):
# the run's foreign keys name them there, and they leave this app's state. State only: no SQL runs.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0001_initial'),
        ('desk', '0002_conversations_in_their_app'),
        ('runs', '0017_quoted_tool_call_steps'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name='session',
                    name='end_user',
                ),
                migrations.AlterField(
                    model_name='run',
                    name='end_user',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='runs', to='conversations.enduser'),
                ),
                migrations.RemoveField(
                    model_name='message',
                    name='project',
                ),
                migrations.RemoveField(
                    model_name='message',
                    name='run',
                ),
                migrations.RemoveField(
                    model_name='message',
                    name='session',
                ),
                migrations.RemoveField(
                    model_name='segment',
                    name='session',
                ),
                migrations.RemoveField(
                    model_name='segment',
                    name='version',
                ),
                migrations.AlterField(
                    model_name='run',
                    name='segment',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='runs', to='conversations.segment'),
                ),
                migrations.RemoveField(
                    model_name='session',
                    name='agent',
                ),
                migrations.RemoveField(
                    model_name='session',
                    name='created_by_key',
                ),
                migrations.RemoveField(
                    model_name='session',
                    name='project',
                ),
                migrations.AlterField(
                    model_name='run',
                    name='session',
                    field=models.ForeignKey(blank=True, db_index=False, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='runs', to='conversations.session'),
                ),
                migrations.RemoveField(
                    model_name='sessionevent',
                    name='session',
                ),
                migrations.DeleteModel(
                    name='EndUser',
                ),
                migrations.DeleteModel(
                    name='Message',
                ),
                migrations.DeleteModel(
                    name='Segment',
                ),
                migrations.DeleteModel(
                    name='Session',
                ),
                migrations.DeleteModel(
                    name='SessionEvent',
                ),
            ],
        ),
    ]
