# Tickets, handoffs and the ticket counter now belong to the `desk` app (desk/migrations/0001_initial.py, which this
# depends on). Taken out of this app's state only: the tables stay, with their data, under the desk's models (which
# keep their names: `runs_ticket`, `runs_handoff`, `runs_ticketcounter`). No SQL runs.

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0010_foreign_keys_checked_in_statement'),
        ('desk', '0001_initial'),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[],
            state_operations=[
                migrations.DeleteModel(name='Handoff'),
                migrations.DeleteModel(name='Ticket'),
                migrations.DeleteModel(name='TicketCounter'),
            ],
        ),
    ]
