# The desk's foreign keys to the conversation now name `conversations` (conversations/migrations/0001). State only:
# the columns and constraints are the same, no SQL runs.

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('conversations', '0001_initial'),
        ('desk', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.AlterField(
                    model_name='handoff',
                    name='end_user',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='conversations.enduser'),
                ),
                migrations.AlterField(
                    model_name='handoff',
                    name='session',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='conversations.session'),
                ),
                migrations.AlterField(
                    model_name='ticket',
                    name='end_user',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='conversations.enduser'),
                ),
                migrations.AlterField(
                    model_name='ticket',
                    name='session',
                    field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, to='conversations.session'),
                ),
            ],
        ),
    ]
