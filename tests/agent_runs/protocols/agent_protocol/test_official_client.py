"""The official Agent Protocol v1 set (``/ap/v1/agent/``) as the unmodified official Python
client, ``agent-protocol-client==1.1.0``, drives it in agbenchmark's loop: over real HTTP
against daphne, with a real RQ worker running the stages on the demo model.

The client is aiohttp + pydantic v1, so it runs in a virtualenv of its own
(tests/clients/agent_protocol/.venv, made by the test command .ci/test from requirements.txt
there) as a script, tests/clients/agent_protocol/agbenchmark_loop.py, which prints what it saw
as one JSON document. What the client breaks on (docs/protocols/agent-protocol.md): a 201
makes it give ``None`` for a step, silently, which ends agbenchmark's loop; a step status
``failed`` or an object output fails its validation.
"""

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runs.models import Artifact, Step
from tests.conftest import DEMO, serving

CLIENT_DIR = Path(__file__).resolve().parents[3] / "clients" / "agent_protocol"
CLIENT_PYTHON = CLIENT_DIR / ".venv" / "bin" / "python"
SCRIPT = CLIENT_DIR / "agbenchmark_loop.py"
STAGES = ["router", "worker", "memory"]
# What the script sends (tests/clients/agent_protocol/agbenchmark_loop.py).
TASK_INPUT = "Summarise the brief I attached"
SECOND_INPUT = "And what is on my calendar?"
UPLOADED = ("brief.txt", "notes")

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture(scope="module", autouse=True)
def _client_installed() -> None:
    """The client is installed by the test command (.ci/test), never skipped for."""
    install = (
        f"python3 -m venv {CLIENT_DIR / '.venv'} && {CLIENT_PYTHON} -m pip install "
        f"-r {CLIENT_DIR / 'requirements.txt'} (the test command .ci/test does)"
    )
    assert CLIENT_PYTHON.exists(), f"the Agent Protocol client's virtualenv is missing: {install}"
    probe = subprocess.run(
        [
            str(CLIENT_PYTHON),
            "-c",
            "import importlib.metadata as m, agent_protocol_client;"
            "print(m.version('agent-protocol-client'))",
        ],
        capture_output=True,
        text=True,
    )
    assert probe.returncode == 0, (
        f"agent-protocol-client does not import: {probe.stderr}\n{install}"
    )
    assert probe.stdout.strip() == "1.1.0", f"agent-protocol-client {probe.stdout}: {install}"


@pytest.fixture
def server_port(redis_queue: Any, tmp_path: Path) -> Iterator[int]:
    """daphne and a real worker on the test database and Redis, sharing an attachments
    storage of this test's own, with the demo model in every stage."""
    env = {
        **DEMO,
        "ATTACHMENT_STORAGE_ROOT": str(tmp_path / "attachments"),
        "AGENT_PROTOCOL_STEP_WAIT_SECONDS": "60",
    }
    with serving(**env) as port:
        yield port


def run_client(port: int, token: str, workdir: Path) -> dict[str, Any]:
    workdir.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(CLIENT_PYTHON), str(SCRIPT), f"http://127.0.0.1:{port}", token, str(workdir)],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, f"the client failed:\n{done.stderr}"
    seen: dict[str, Any] = json.loads(done.stdout)
    print("the client saw:", json.dumps(seen, indent=1, ensure_ascii=False))  # on a failure
    return seen


def assert_turn(steps: list[dict[str, Any] | None], task_id: str) -> None:
    """One turn: the three stages in order, each a completed Step with a string output (the
    memory stage's, what it kept, may be empty), only the last one ``is_last``."""
    assert None not in steps, f"the client gave no step (a 201?): {steps}"
    assert [step["name"] for step in steps if step] == STAGES, steps
    for step in steps:
        assert step is not None
        assert step["type"] == "Step" and step["task_id"] == task_id
        assert step["status"] == "completed", step
        assert step["output_type"] == "str", step
        assert "status" not in (step["additional_output"] or {}), step  # not a failed step
    assert [step["is_last"] for step in steps if step] == [False, False, True]
    router, worker, _memory = steps
    assert router and json.loads(router["output"])["route"]  # the router's decision, as JSON text
    assert worker and worker["output"]  # the answer


def test_agbenchmark_loop_with_the_official_client(
    server_port: int, alice_token: str, tmp_path: Path
) -> None:
    seen = run_client(server_port, alice_token, tmp_path / "client")

    # The task, as created (a 200 the client deserialized, never a silent None).
    created = seen["created"]
    assert created is not None, "create_agent_task gave None: the server answered a non-200"
    task_id = created["task_id"]
    assert created["type"] == "Task" and created["input"] == TASK_INPUT
    assert created["artifacts"] == []

    # The upload, agbenchmark's way: the file's path, its folder as the relative path.
    [uploaded] = seen["uploaded"]
    assert uploaded["type"] == "Artifact" and not uploaded["agent_created"]
    assert (uploaded["file_name"], uploaded["relative_path"]) == UPLOADED

    # First turn: bodiless steps, one stage each, to is_last.
    first = seen["first_turn"]
    assert_turn(first, task_id)
    first_worker = first[1]
    assert first_worker is not None

    # Its artifacts: the upload, byte for byte, and the agent's answer (the worker's output).
    listed = {a["file_name"]: a for a in seen["after_first_turn"]["artifacts"]}
    assert set(listed) == {"brief.txt", "answer.md"}, listed
    assert seen["after_first_turn"]["pagination"]["total_items"] == 2
    brief, answer = listed["brief.txt"], listed["answer.md"]
    assert brief["artifact_id"] == uploaded["artifact_id"]
    assert not brief["agent_created"] and brief["relative_path"] == "notes"
    assert brief["text"] == seen["uploaded_text"]
    assert answer["agent_created"] is True
    assert answer["text"] == first_worker["output"]
    assert [a["artifact_id"] for a in first_worker["artifacts"]] == [answer["artifact_id"]]

    # Second turn: a step with an input starts the task's next run, then bodiless steps.
    second = seen["second_turn"]
    assert_turn(second, task_id)
    assert second[0] is not None and second[0]["input"] == SECOND_INPUT
    first_ids = {step["step_id"] for step in first if step}
    assert first_ids.isdisjoint(step["step_id"] for step in second if step)
    second_worker = second[1]
    assert second_worker is not None
    [second_answer] = second_worker["artifacts"]
    after = {a["artifact_id"]: a for a in seen["after_second_turn"]["artifacts"]}
    assert set(after) == {uploaded["artifact_id"], answer["artifact_id"]} | {
        second_answer["artifact_id"]
    }
    assert after[second_answer["artifact_id"]]["agent_created"] is True
    assert after[second_answer["artifact_id"]]["text"] == second_worker["output"]
    assert after[answer["artifact_id"]]["sha256"] == answer["sha256"]  # the first kept

    # The read routes.
    assert [t["task_id"] for t in seen["tasks"]["tasks"]] == [task_id]
    assert seen["tasks"]["pagination"] == {
        "total_items": 1,
        "total_pages": 1,
        "current_page": 1,
        "page_size": 100,
    }
    assert seen["task"]["task_id"] == task_id and seen["task"]["input"] == TASK_INPUT
    assert {a["artifact_id"] for a in seen["task"]["artifacts"]} == set(after)
    all_steps = [*first, *second]
    assert seen["steps"]["steps"] == all_steps
    assert seen["steps"]["pagination"] == {
        "total_items": 6,
        "total_pages": 1,
        "current_page": 1,
        "page_size": 100,
    }
    assert seen["steps_got"] == all_steps
    assert seen["steps_page_2_of_4"] == {
        "steps": [step["step_id"] for step in all_steps[4:] if step],
        "pagination": {"total_items": 6, "total_pages": 2, "current_page": 2, "page_size": 4},
    }

    # The errors: the client raises its ApiException (1.1.0 has no subclass per status)
    # with the status and the server's error body.
    errors = seen["errors"]
    for name, status in [
        ("step_after_last_without_input", 400),
        ("unknown_task", 404),
        ("step_of_unknown_task", 404),
        ("unknown_step", 404),
        ("unknown_artifact", 404),
    ]:
        error = errors[name]
        assert (error["type"], error.get("status")) == ("ApiException", status), (name, error)
        body = json.loads(error["body"])
        assert set(body) == {"error", "message"} and body["message"], (name, body)

    # The server's stored steps are what the client saw.
    stored = list(Step.objects.filter(thread_id=task_id).order_by("created_at", "id"))
    assert [(str(s.pk), s.name, s.status, s.is_last, s.source) for s in stored] == [
        (step["step_id"], step["name"], "completed", step["is_last"], "agent")
        for step in all_steps
        if step
    ]
    for row, step in zip(stored, all_steps, strict=True):
        assert step is not None
        # A stored object (the router's decision) reaches the client as its JSON text.
        if isinstance(row.output, str):
            assert step["output"] == row.output
        else:
            assert json.loads(step["output"]) == row.output
        assert step["input"] == row.input
    assert len({step.run_id for step in stored}) == 2  # two runs, one per turn
    stored_artifacts = {str(a.pk): a for a in Artifact.objects.filter(thread_id=task_id)}
    assert set(stored_artifacts) == set(after)
    assert stored_artifacts[answer["artifact_id"]].step_id is not None
    assert str(stored_artifacts[answer["artifact_id"]].step_id) == first_worker["step_id"]
    assert stored_artifacts[uploaded["artifact_id"]].step_id is None
