# Usage records outlive their run: the run may be deleted with its thread (SET_NULL), and each
# record keeps its run's threadId and runId.

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import OuterRef, Subquery


def run_refs_copy(apps, schema_editor):
    UsageRecord = apps.get_model("billing", "UsageRecord")
    Run = apps.get_model("agent_runs", "Run")
    run = Run.objects.filter(pk=OuterRef("run_id"))
    UsageRecord.objects.filter(run__isnull=False).update(
        thread_ref=Subquery(run.values("thread_id")[:1]),
        run_ref=Subquery(run.values("run_id")[:1]),
    )


class Migration(migrations.Migration):

    dependencies = [
        ('agent_runs', '0007_run_core_journal'),
        ('billing', '0001_initial'),
    ]

    operations = [
        migrations.AddField(
            model_name='usagerecord',
            name='run_ref',
            field=models.CharField(blank=True, help_text="The run's runId.", max_length=128),
        ),
        migrations.AddField(
            model_name='usagerecord',
            name='thread_ref',
            field=models.UUIDField(blank=True, help_text="The run's threadId.", null=True),
        ),
        migrations.AlterField(
            model_name='usagerecord',
            name='run',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='usage_records', to='agent_runs.run'),
        ),
        migrations.RunPython(run_refs_copy, migrations.RunPython.noop),
    ]
