"""The agent dashboard's index: an agent's events of one type over a time window (its per-hour
tags and evictions) read as one index range, whatever the size of the events table."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("artifacts_app", "0005_agent_kinds"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="event",
            index=models.Index(
                fields=["agent", "type", "created_at"], name="event_agent_type_created"
            ),
        ),
    ]
