"""The official A2A JavaScript client (``@a2a-js/sdk``, pinned in tests/clients/a2a/package.json
and installed by the test command), unmodified, streaming one task from the server over real
HTTP against daphne, with a real worker (tests/clients/a2a/stream_task.mjs)."""

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from agent_runs.events.reads import run_event_payloads
from agent_runs.models import Run
from agent_runs.protocols.a2a.outbound import TaskProjection

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.integration,
    pytest.mark.skipif(shutil.which("node") is None, reason="Node.js is not installed"),
]

CLIENT_DIR = Path(__file__).resolve().parents[3] / "clients" / "a2a"  # tests/clients/a2a


def run_client(port: int, token: str, text: str) -> list[dict[str, Any]]:
    node = shutil.which("node")
    assert node is not None
    answer = subprocess.run(
        [node, "stream_task.mjs", f"http://127.0.0.1:{port}", token, text],
        cwd=CLIENT_DIR,
        capture_output=True,
        text=True,
        timeout=90,
        env=dict(os.environ),
    )
    assert answer.returncode == 0, answer.stderr
    return [json.loads(line) for line in answer.stdout.splitlines()]


def test_the_client_is_installed():
    """Installed by the test command (.ci/test), never skipped for."""
    assert (CLIENT_DIR / "node_modules" / "@a2a-js" / "sdk").is_dir(), "run .ci/test"


def test_the_js_client_streams_a_task_to_completion(port, alice_token):
    *events, final = run_client(port, alice_token, "Hello")

    task = final["task"]
    assert events[0]["task"]["status"] == {"state": "TASK_STATE_SUBMITTED"}
    assert events[-1]["statusUpdate"]["status"] == {"state": "TASK_STATE_COMPLETED"}
    pieces = [e["artifactUpdate"] for e in events if "artifactUpdate" in e]
    assert pieces[-1]["lastChunk"] is True
    text = "".join(piece["artifact"]["parts"][0]["text"] for piece in pieces)
    assert text and task["artifacts"][0]["parts"] == [{"text": text}]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [m["role"] for m in task["history"]] == ["ROLE_USER", "ROLE_AGENT"]
    # What the client read is the run's stored journal through the translator: a replay.
    run = Run.objects.get(run_id=task["id"])
    replay = TaskProjection(task_id=run.run_id, context_id=str(run.thread_id))
    replay.user_message(run.request["message"])
    replayed = replay.submitted()
    for payload in run_event_payloads(run=run):
        replayed += replay.translate(payload)
    assert events == replayed
