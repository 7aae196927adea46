# The column keeps a database default ('[]'): code from before it (a worker still running during a deploy) writes
# messages without naming it. PostgreSQL adds a column with a constant default without rewriting the table. The
# assistant messages already there take their run's unverified claims, so a reload of the chat widget doesn't show
# an earlier unconfirmed answer either.

from django.db import migrations, models

BACKFILL = """
UPDATE runs_message AS message SET unverified_claims = run.output -> 'unverified_claims'
FROM runs_run AS run
WHERE message.run_id = run.id AND message.role = 'assistant'
    AND jsonb_typeof(run.output -> 'unverified_claims') = 'array'
    AND jsonb_array_length(run.output -> 'unverified_claims') > 0
"""


def backfill(apps, schema_editor):  # type: ignore[no-untyped-def]
    if schema_editor.connection.vendor == "postgresql":
        schema_editor.execute(BACKFILL)
        return
    message_model = apps.get_model("runs", "Message")
    for message in message_model.objects.filter(role="assistant").select_related("run").iterator():
        claims = (message.run.output or {}).get("unverified_claims") if isinstance(message.run.output, dict) else None
        if isinstance(claims, list) and claims:
            message_model.objects.filter(pk=message.pk).update(unverified_claims=claims)


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_run_followed_until"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="unverified_claims",
            field=models.JSONField(
                blank=True, db_default=models.Value([], output_field=models.JSONField()), default=list
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
