"""Double texting on the Agent API: the request's ``multitask`` field, over real HTTP
against daphne, with a real worker whose model is a loopback server the test slows down.
docs/protocols/multitask.md."""

import threading

import pytest

from agent_runs.models import Run
from tests.agent_runs.protocols.agent_api.test_process import (
    PROCESS,
    Answer,
    agent_request,
    call,
    model,
)
from tests.conftest import wait_for

__all__ = ["model"]  # the fixture, used by name

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def test_the_multitask_field_chooses_what_a_request_on_a_busy_session_does(
    alice_token, daphne_port, model
):
    model.delay = 30  # the first response's model call outlasts the test
    first: dict[str, Answer] = {}

    def long_request() -> None:
        body = agent_request("A long question", session_id="s1", stream=False)
        first["answer"] = call(daphne_port, "POST", PROCESS, body, token=alice_token, timeout=90)

    waiting = threading.Thread(target=long_request)
    waiting.start()
    wait_for(lambda: model.requests)

    def send(multitask: str, **fields: object) -> Answer:
        body = agent_request("Now this", session_id="s1", multitask=multitask, **fields)
        return call(daphne_port, "POST", PROCESS, body, token=alice_token, timeout=90)

    unknown = send("later")
    rejected = send("reject")
    model.delay = 0
    instead = send("interrupt", stream=False)
    waiting.join(timeout=90)

    assert unknown.status == 400
    error = unknown.json()["error"]
    assert error["code"] == "invalid_request" and "multitask" in error["message"]
    assert "'reject', 'enqueue', 'interrupt' or 'rollback'" in error["message"]
    assert rejected.status == 409
    assert rejected.json() == {
        "error": {
            "code": "thread_busy",
            "message": "the thread has a run queued, running or paused",
        }
    }
    assert instead.status == 200 and instead.json()["status"] == "completed"
    runs = list(Run.objects.order_by("pk"))
    assert [run.status for run in runs] == [Run.Status.CANCELLED, Run.Status.COMPLETED]
    assert runs[1].multitask == "interrupt"
