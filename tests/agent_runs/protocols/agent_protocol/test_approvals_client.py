"""An approval through the official Agent Protocol v1 set as the unmodified official client,
``agent-protocol-client==1.1.0``, steps through it (tests/clients/agent_protocol/
approval_loop.py, in the client's own virtualenv): over real HTTP against daphne, a real RQ
worker whose model is a loopback server. The stage that stops on the approval is answered by
the ``approval`` step, whose output asks for input; a step with ``additional_input``
answers it and the steps after it run the rest (docs/protocols/agent-protocol.md,
Approvals)."""

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from agent_runs.models import CalendarEvent, Interrupt, Run
from agent_runs.services.run_request import run_step_budget
from tests.agent_runs.protocols.agent_protocol.test_official_client import (
    CLIENT_DIR,
    CLIENT_PYTHON,
    _client_installed,  # noqa: F401  # the client's virtualenv is checked first
)
from tests.conftest import fake_model_env, serving
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

SCRIPT = CLIENT_DIR / "approval_loop.py"
STANDUP = {"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "UTC"}


@pytest.fixture
def model(redis_queue: Any, tmp_path: Path) -> Iterator[tuple[FakeOpenAI, int]]:
    """daphne and a real worker whose worker stage calls the loopback model (the router and
    the memory stage are the demo's)."""
    with FakeOpenAI() as fake:
        env = {
            **fake_model_env(fake, router=False),
            "ATTACHMENT_STORAGE_ROOT": str(tmp_path / "attachments"),
            "AGENT_PROTOCOL_STEP_WAIT_SECONDS": "60",
        }
        with serving(**env) as port:
            yield fake, port


def run_client(port: int, token: str, verdict: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(CLIENT_PYTHON), str(SCRIPT), f"http://127.0.0.1:{port}", token, verdict],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, f"the client failed:\n{done.stderr}"
    seen: dict[str, Any] = json.loads(done.stdout)
    print("the client saw:", json.dumps(seen, indent=1, ensure_ascii=False))  # on a failure
    return seen


@pytest.mark.parametrize("verdict", ["approve", "reject"])
def test_the_official_client_sees_the_approval_step_and_answers_it(alice_token, model, verdict):
    fake, port = model
    fake.tool_call_turns = [[("call_c1", "calendar_create", json.dumps(STANDUP))]]
    fake.answer = ["Done."]

    seen = run_client(port, alice_token, verdict)

    task_id = seen["task_id"]
    before = seen["before"]
    assert [step["name"] for step in before] == ["router", "approval"], before
    approval = before[-1]
    interrupt = Interrupt.objects.get()
    # A step whose output asks for input: the client reads it as a Step, its output text.
    assert approval["type"] == "Step" and approval["status"] == "created"
    assert approval["output_type"] == "str" and interrupt.id in approval["output"]
    assert approval["is_last"] is False
    shown = approval["additional_output"]["interrupt"]
    assert shown["id"] == interrupt.id and shown["metadata"]["toolName"] == "calendar_create"
    assert seen["again"] == approval  # waiting: the same step, as it stands

    answered = seen["answered"]
    approved = verdict == "approve"
    assert answered["step_id"] == approval["step_id"] and answered["status"] == "completed"
    assert answered["additional_input"] == {"interruptId": interrupt.id, "approved": approved}
    assert answered["is_last"] is False

    after = seen["after"]
    assert [step["name"] for step in after] == ["worker", "memory"], after
    assert all(step["status"] == "completed" for step in after)
    assert after[0]["output"] == "Done." and after[-1]["is_last"] is True
    assert CalendarEvent.objects.exists() == approved

    listed = seen["steps"]
    assert [step["name"] for step in listed] == [
        "router",
        "worker",
        "approval",
        "worker",
        "memory",
    ]
    assert [step["is_last"] for step in listed] == [False, False, False, False, True]
    assert listed[2] == answered == seen["approval_got"]
    assert all(step["task_id"] == task_id for step in listed)

    late, unknown = seen["errors"]["late"], seen["errors"]["unknown"]
    assert (late["type"], late["status"]) == ("ApiException", 409)
    assert json.loads(late["body"])["message"] == (
        f'interrupt "{interrupt.id}" is not open: it is resolved'
    )
    assert (unknown["type"], unknown["status"]) == ("ApiException", 404)

    held, went_on = Run.objects.filter(thread_id=task_id).order_by("created_at")
    assert went_on.continues_id == held.pk and run_step_budget(went_on) is not None
    interrupt.refresh_from_db()
    assert interrupt.answered_by_id == went_on.pk
