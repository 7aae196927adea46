# A nullable column without a default: added without rewriting the table.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0007_idempotency_keys"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="followed_until",
            field=models.DateTimeField(blank=True, null=True),
        ),
    ]
