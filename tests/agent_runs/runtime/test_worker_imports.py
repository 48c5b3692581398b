"""The worker process imports no protocol package: not at start, and not to run a run and
tell its changes of status to their receivers (the push outbox's, which loads a protocol
only to shape a notification a config waits for). The import contracts (pyproject.toml)
see the imports written in the code; this sees what a real worker has loaded."""

import json
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.contrib.auth.models import User

from agent_runs.models import Run
from agent_runs.run_input import ForwardedProps, InputMessage, RunAgentInput
from agent_runs.services.runs import run_create
from tests.conftest import DEMO, service_env

pytestmark = pytest.mark.django_db(transaction=True)

WORKER = textwrap.dedent(
    """
    import json, sys
    import django
    django.setup()
    from django.core.management import call_command
    call_command("rqworker", sys.argv[1], burst=True)
    print(json.dumps(sorted(
        name for name in sys.modules
        if name.startswith("agent_runs.protocols") or name == "a2a" or name.startswith("a2a.")
    )))
    """
)


def worker_burst() -> Any:
    """What a real ``rqworker`` in burst mode (it runs what is queued, then stops) has
    imported once it stops: the protocol modules and the A2A SDK's."""
    result = subprocess.run(
        [sys.executable, "-c", WORKER, settings.AGENT_RUNS_QUEUE],
        cwd=Path(settings.BASE_DIR),
        env=service_env(REDIS_URL=settings.REDIS_URL, **DEMO),
        capture_output=True,
        text=True,
        timeout=180,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_a_worker_that_runs_a_run_imports_no_protocol(redis_queue):
    alice = User.objects.create_user(username="alice")
    run = run_create(
        user=alice,
        run_input=RunAgentInput(
            thread_id=uuid.uuid4(),
            run_id="r1",
            messages=[InputMessage(id="m1", role="user", content="Hello")],
            forwarded_props=ForwardedProps(runtime_mode="chat"),
        ),
        protocol=Run.Protocol.A2A,  # a protocol that pushes, with no config waiting
    )

    assert worker_burst() == []
    assert Run.objects.get(pk=run.pk).status == Run.Status.COMPLETED
