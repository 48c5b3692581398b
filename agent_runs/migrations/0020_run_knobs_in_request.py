# Run.step_budget and Run.answer_artifact, knobs of one protocol (the Agent Protocol's tasks),
# kept in Run.request (services/run_request.py) rather than as columns of the core's model.

from django.db import migrations, models
from django.db.models import Q

_BATCH = 1000


def _rewrite(runs, model, change):
    """Each run of ``runs`` changed by ``change`` and saved, a batch at a time."""
    batch = []
    for run in runs.iterator(chunk_size=_BATCH):
        change(run)
        batch.append(run)
        if len(batch) == _BATCH:
            model.objects.bulk_update(batch, ["request", "step_budget", "answer_artifact"])
            batch.clear()
    if batch:
        model.objects.bulk_update(batch, ["request", "step_budget", "answer_artifact"])


def knobs_into_request(apps, schema_editor):
    """A run's step budget and its answer kept as an artifact, as keys of its request."""
    Run = apps.get_model("agent_runs", "Run")

    def change(run):
        request = dict(run.request or {})
        if run.step_budget is not None:
            request["step_budget"] = run.step_budget
        if run.answer_artifact:
            request["answer_artifact"] = True
        run.request = request

    runs = Run.objects.filter(Q(step_budget__isnull=False) | Q(answer_artifact=True))
    _rewrite(runs, Run, change)


def knobs_out_of_request(apps, schema_editor):
    """Back: the keys of a run's request as the columns they were."""
    Run = apps.get_model("agent_runs", "Run")

    def change(run):
        request = dict(run.request or {})
        run.step_budget = request.pop("step_budget", None)
        run.answer_artifact = bool(request.pop("answer_artifact", False))
        run.request = request

    runs = Run.objects.filter(
        Q(request__has_key="step_budget") | Q(request__has_key="answer_artifact")
    )
    _rewrite(runs, Run, change)


class Migration(migrations.Migration):

    dependencies = [
        ('agent_runs', '0019_run_protocol'),
    ]

    operations = [
        migrations.RunPython(knobs_into_request, knobs_out_of_request),
        migrations.RemoveField(
            model_name='run',
            name='answer_artifact',
        ),
        migrations.RemoveField(
            model_name='run',
            name='step_budget',
        ),
    ]
