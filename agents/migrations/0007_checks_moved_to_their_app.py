# Checks and check runs now belong to `checks` (checks/migrations/0001, which this depends on). State only: no SQL
# runs.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('agents', '0006_checks'),
        ('checks', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.RemoveField(
                    model_name='checkrun',
                    name='agent',
                ),
                migrations.RemoveField(
                    model_name='checkrun',
                    name='project',
                ),
                migrations.DeleteModel(
                    name='Check',
                ),
                migrations.DeleteModel(
                    name='CheckRun',
                ),
            ],
        ),
    ]
