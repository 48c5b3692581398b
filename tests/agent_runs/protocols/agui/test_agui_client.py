"""The event stream read by the official AG-UI TypeScript client (``@ag-ui/client``, pinned in
tests/clients/agui/package.json), unmodified: its SSE parser frames the stream, its schemas
and its ``verifyEvents`` judge it (tests/clients/agui/verify_stream.mjs). Over real HTTP
against daphne, with runs through a real worker on the demo model.

The client's verifier takes a stream of several runs one after another (a RUN_STARTED after
a terminal event starts a new run), so a whole thread is verified as one stream; each run is
also read and verified on its own with ``runId``.
"""

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

from agent_runs.models import Run, RunEvent
from tests.conftest import post_run, run_input, wait_for, work_burst

NODE = shutil.which("node")
CLIENT_DIR = Path(__file__).resolve().parents[3] / "clients" / "agui"  # tests/clients/agui
SCRIPT = CLIENT_DIR / "verify_stream.mjs"
TERMINAL = {"RUN_FINISHED", "RUN_ERROR"}

pytestmark = [
    pytest.mark.django_db(transaction=True),
    pytest.mark.integration,
    pytest.mark.skipif(NODE is None, reason="Node.js is not installed: no AG-UI client to run"),
]


@pytest.fixture(scope="module", autouse=True)
def _client_installed() -> None:
    """The client is installed by the test command (.ci/test), never skipped for."""
    assert (CLIENT_DIR / "node_modules" / "@ag-ui" / "client").is_dir(), (
        "@ag-ui/client is not installed: run `npm ci --prefix tests/clients/agui` "
        "(the test command .ci/test does)"
    )


@dataclass
class Verdict:
    """What the client made of a stream: the events its parser delivered, and whether its
    pipeline (schemas, verifyEvents) accepted them, with its error message if not."""

    events: list[dict[str, Any]]
    ok: bool
    error: str | None
    stderr: str

    @property
    def types(self) -> list[str]:
        return [event["type"] for event in self.events]

    def runs(self) -> list[tuple[str, list[str]]]:
        """The stream cut into runs: each run's id and its event types, in order; fails on
        an event outside a run or one of another run inside it (interleaving)."""
        runs: list[tuple[str, list[str]]] = []
        current: str | None = None
        for event in self.events:
            kind, run_id = event["type"], event["runId"]
            if current is None:
                assert kind == "RUN_STARTED", f"{kind} of {run_id} outside any run"
                current = run_id
                runs.append((run_id, []))
            assert run_id == current, f"{kind} of {run_id} inside {current}"
            runs[-1][1].append(kind)
            if kind in TERMINAL:
                current = None
        return runs


class Reader:
    """The client reading one stream, in a process of its own."""

    def __init__(self, port: int, thread_id: str, token: str, directory: Path, **query: str):
        url = f"http://127.0.0.1:{port}/api/v1/agent/runs/{thread_id}/events"
        if query:
            url += "?" + urlencode(query)
        directory.mkdir(parents=True, exist_ok=True)
        self.stdout_path = directory / "stdout"
        self.stderr_path = directory / "stderr"
        with self.stdout_path.open("wb") as stdout, self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [str(NODE), str(SCRIPT), url, token],
                cwd=CLIENT_DIR,
                stdout=stdout,
                stderr=stderr,
                env=dict(os.environ, AGUI_TIMEOUT_MS="20000"),
            )

    def wait_connected(self) -> None:
        """Until the response headers are in: the server has decided where the stream
        starts."""
        wait_for(lambda: b'{"connected":200}' in self.stderr_path.read_bytes())

    def verdict(self) -> Verdict:
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise
        lines = [json.loads(line) for line in self.stdout_path.read_text().splitlines()]
        stderr = self.stderr_path.read_text()
        assert lines, f"the client printed nothing; stderr: {stderr}"
        *events, result = lines
        assert self.process.returncode == (0 if result["ok"] else 1), result
        return Verdict(events=events, ok=result["ok"], error=result.get("error"), stderr=stderr)


def read_with_client(
    port: int, thread_id: str, token: str, directory: Path, **query: str
) -> Verdict:
    return Reader(port, thread_id, token, directory, **query).verdict()


def journal_types(**filters: Any) -> list[str]:
    return list(RunEvent.objects.filter(**filters).order_by("pk").values_list("type", flat=True))


def assert_accepted(verdict: Verdict) -> None:
    assert verdict.ok, f"the AG-UI client rejected the stream: {verdict.error}\n{verdict.types}"
    # Every event is one the protocol knows: the client drops any other with this warning
    # (and strips the server's extra fields, threadId, stage, answer..., with another).
    assert "Dropping unrecognised event" not in verdict.stderr, verdict.stderr


def test_a_run_with_a_tool_call_is_a_well_formed_agui_run(
    alice, alice_token, redis_queue, daphne_port, tmp_path
):
    body = run_input(messages=[{"id": "m1", "role": "user", "content": "/tool calendar_list"}])
    post_run(alice, body)
    work_burst(redis_queue)

    verdict = read_with_client(daphne_port, body["threadId"], alice_token, tmp_path)

    assert_accepted(verdict)
    assert verdict.types == journal_types(run__run_id=body["runId"])  # every frame parsed
    assert verdict.runs() == [(body["runId"], verdict.types)]
    assert verdict.types[0] == "RUN_STARTED" and verdict.types[-1] == "RUN_FINISHED"
    assert {"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"} <= set(
        verdict.types
    )


def test_a_cancelled_queued_run_is_a_whole_run_after_the_one_before_it(
    alice, alice_token, redis_queue, daphne_port, tmp_path
):
    first = run_input(runId="run-1")
    thread_id = first["threadId"]
    post_run(alice, first)
    post_run(alice, run_input(threadId=thread_id, runId="run-2"))
    assert alice.post("/api/v1/agent/runs/run-2/cancel").json()["status"] == "cancelled"
    work_burst(redis_queue)

    run_1 = read_with_client(daphne_port, thread_id, alice_token, tmp_path / "1", runId="run-1")
    run_2 = read_with_client(daphne_port, thread_id, alice_token, tmp_path / "2", runId="run-2")
    thread = read_with_client(
        daphne_port, thread_id, alice_token, tmp_path / "all", lastEventId="0"
    )

    for verdict in (run_1, run_2, thread):
        assert_accepted(verdict)
    assert run_1.runs() == [("run-1", run_1.types)]
    assert run_1.types[0] == "RUN_STARTED" and run_1.types[-1] == "RUN_FINISHED"
    assert run_2.runs() == [("run-2", ["RUN_STARTED", "RUN_ERROR"])]
    cancelled = RunEvent.objects.get(run__run_id="run-2", type="RUN_ERROR").payload
    assert cancelled["code"] == "cancelled"
    assert thread.runs() == [("run-1", run_1.types), ("run-2", run_2.types)]  # no interleaving
    assert thread.types == journal_types(thread_id=thread_id)
    assert Run.objects.get(run_id="run-2").status == Run.Status.CANCELLED


def test_a_stream_opened_while_the_latest_run_is_queued_starts_at_its_run_started(
    alice, alice_token, redis_queue, daphne_port, tmp_path
):
    first = run_input(runId="run-1")
    thread_id = first["threadId"]
    post_run(alice, first)
    work_burst(redis_queue)
    post_run(alice, run_input(threadId=thread_id, runId="run-2"))  # queued

    reader = Reader(daphne_port, thread_id, alice_token, tmp_path)
    reader.wait_connected()
    assert Run.objects.get(run_id="run-2").status == Run.Status.QUEUED
    work_burst(redis_queue)
    verdict = reader.verdict()

    assert_accepted(verdict)
    assert verdict.runs() == [("run-2", verdict.types)]
    assert verdict.types == journal_types(run__run_id="run-2")
    assert verdict.types[0] == "RUN_STARTED" and verdict.types[-1] == "RUN_FINISHED"


def test_the_client_rejects_a_stream_resumed_mid_run(
    alice, alice_token, redis_queue, daphne_port, tmp_path
):
    """The check is not vacuous: a resume after RUN_STARTED (what a reconnecting client that
    has seen the start asks for) is not a whole run, and the verifier says so."""
    body = run_input()
    post_run(alice, body)
    work_burst(redis_queue)
    started = RunEvent.objects.get(run__run_id=body["runId"], type="RUN_STARTED")

    verdict = read_with_client(
        daphne_port, body["threadId"], alice_token, tmp_path, lastEventId=str(started.pk)
    )

    assert not verdict.ok
    assert verdict.error == "First event must be 'RUN_STARTED'"
    assert verdict.types == ["STEP_STARTED"]  # the client stops at the first bad event
