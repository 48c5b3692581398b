from django.db import migrations, models


def number_events_per_run(apps, schema_editor):
    """Each stored event's ordinal within its run, in id order (0 for its RUN_STARTED)."""
    table = apps.get_model("agent_runs", "RunEvent")._meta.db_table
    with schema_editor.connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET seq = (SELECT COUNT(*) FROM {table} earlier "
            f"WHERE earlier.run_id = {table}.run_id AND earlier.id < {table}.id)"
        )


def automation_job_from_input(apps, schema_editor):
    """The automation job a stored run's input names, as the new column."""
    Run = apps.get_model("agent_runs", "Run")
    for run in Run.objects.filter(runtime_mode="automation").only("pk", "input"):
        names = [
            item.get("value")
            for item in (run.input or {}).get("context", [])
            if isinstance(item, dict) and item.get("description") == "automation_job"
        ]
        if names and isinstance(names[0], str):
            Run.objects.filter(pk=run.pk).update(automation_job=names[0][:100])


class Migration(migrations.Migration):
    dependencies = [
        ("agent_runs", "0006_usermemory_unique"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="automation_job",
            field=models.CharField(blank=True, max_length=100),
        ),
        migrations.AddField(
            model_name="run",
            name="claim_token",
            field=models.UUIDField(blank=True, editable=False, null=True),
        ),
        migrations.AddField(
            model_name="run",
            name="heartbeat_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AddField(
            model_name="runevent",
            name="seq",
            field=models.PositiveIntegerField(null=True),
        ),
        migrations.RunPython(number_events_per_run, migrations.RunPython.noop),
        migrations.RunPython(automation_job_from_input, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="runevent",
            name="seq",
            field=models.PositiveIntegerField(),
        ),
        migrations.AddConstraint(
            model_name="runevent",
            constraint=models.UniqueConstraint(
                fields=("run", "seq"), name="event_unique_seq_per_run"
            ),
        ),
        migrations.RemoveIndex(
            model_name="runevent",
            name="event_run_id",
        ),
    ]
