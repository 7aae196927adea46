# A column with a constant default: PostgreSQL adds it without rewriting the table.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0008_run_followed_until"),
    ]

    operations = [
        migrations.AddField(
            model_name="message",
            name="unverified_claims",
            field=models.JSONField(blank=True, default=list),
        ),
    ]
