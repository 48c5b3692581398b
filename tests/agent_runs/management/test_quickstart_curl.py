"""The ``curl`` the quick start prints (``quickstart.try_curl``): pasted into a shell twice,
against a real daphne and worker, it makes two runs of its thread, not one run replayed."""

import subprocess
from typing import Any

import pytest

from agent_runs.management.commands.quickstart import try_curl
from agent_runs.models import Message, Run
from tests.conftest import DEMO, serving

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def test_the_printed_curl_pasted_twice_makes_two_runs(alice_token: str, redis_queue: Any) -> None:
    with serving(**DEMO) as port:
        command = try_curl(url=f"http://127.0.0.1:{port}", token=alice_token)
        streams = [
            subprocess.run(["sh", "-c", command], capture_output=True, timeout=60, check=True)
            for _paste in range(2)
        ]

    for stream in streams:
        assert b"RUN_FINISHED" in stream.stdout, stream.stdout
    runs = list(Run.objects.order_by("created_at"))
    assert len(runs) == 2
    assert runs[0].thread_id == runs[1].thread_id
    assert runs[0].run_id != runs[1].run_id
    assert all(run.status == Run.Status.COMPLETED for run in runs)
    user_messages = Message.objects.filter(role=Message.Role.USER).values_list(
        "message_id", flat=True
    )
    assert len(set(user_messages)) == 2
