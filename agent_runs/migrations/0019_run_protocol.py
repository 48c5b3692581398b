# Run.protocol: the protocol whose request made the run, a column (indexed with the run's
# thread, and so its owner) rather than a key of Run.request that two of five protocols set.

from django.db import migrations, models


def protocol_fill(apps, schema_editor):
    """The protocol of the runs made before the column: ``request["protocol"]`` where a
    protocol set it (A2A, the Agent API); an Agent Protocol task's runs keep their answer
    as an artifact; a Responses API run's request holds the request's ``model`` and
    ``store``; every other run is AG-UI's (the default)."""
    Run = apps.get_model("agent_runs", "Run")
    Run.objects.filter(request__has_keys=["model", "store"]).update(protocol="openai_responses")
    Run.objects.filter(answer_artifact=True).update(protocol="agent_protocol")
    for protocol in ("a2a", "agent_api"):
        Run.objects.filter(request__protocol=protocol).update(protocol=protocol)


class Migration(migrations.Migration):

    dependencies = [
        ('agent_runs', '0018_automation_schedule'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='protocol',
            field=models.CharField(choices=[('agui', 'AG-UI'), ('agent_protocol', 'Agent Protocol'), ('agent_api', 'Agent API'), ('openai_responses', 'OpenAI Responses API'), ('a2a', 'A2A')], default='agui', max_length=32),
        ),
        migrations.RunPython(protocol_fill, migrations.RunPython.noop, elidable=True),
        migrations.AddIndex(
            model_name='run',
            index=models.Index(fields=['thread', 'protocol'], name='run_thread_protocol'),
        ),
    ]
