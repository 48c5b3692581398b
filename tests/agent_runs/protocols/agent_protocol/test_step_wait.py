"""The official set's step (``POST /ap/v1/agent/tasks/{id}/steps``) waits for its stage by
following the task's journal on daphne's event loop: more waits than daphne has request
threads leave it answering everything else, and each wait ends with its step, a 503 when no
worker started the run in time, or a 400 when the run ended without a stage."""

import http.client
import json
import os
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from agent_runs.models import Run
from agent_runs.services.tokens import api_token_create
from tests.conftest import start_daphne, start_worker, stop_process, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

# As config/asgi_handler.py sizes daphne's request threads.
REQUEST_THREADS = min(32, (os.cpu_count() or 1) + 4)
DEMO_MODELS = {
    "AGENT_WORKER_MODEL": "demo",
    "AGENT_ROUTER_MODEL": "demo",
    "AGENT_MEMORY_MODEL": "demo",
}


def call(port: int, token: str, method: str, path: str, body: Any = None) -> tuple[int, Any]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=90)
    try:
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        payload = None if body is None else json.dumps(body).encode()
        connection.request(method, path, body=payload, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def task_create(port: int, token: str, text: str) -> str:
    status, task = call(port, token, "POST", "/ap/v1/agent/tasks", {"input": text})
    assert status == 200, task
    task_id: str = task["task_id"]
    return task_id


@pytest.fixture
def server(redis_queue: Any, tmp_path: Path) -> Iterator[tuple[int, dict[str, str]]]:
    """daphne alone: a test starts a worker when it wants the runs to go on."""
    env = {
        "ATTACHMENT_STORAGE_ROOT": str(tmp_path / "attachments"),
        "AGENT_PROTOCOL_STEP_WAIT_SECONDS": "600",  # longer than a test waits for an answer
        **DEMO_MODELS,
    }
    process, port = start_daphne(redis_url=settings.REDIS_URL, **env)
    try:
        yield port, env
    finally:
        stop_process(process)


def test_step_waits_hold_no_request_thread(server):
    port, env = server
    token = api_token_create(username="alice")
    waits = REQUEST_THREADS + 2
    task_ids = [task_create(port, token, f"Plan day {n}") for n in range(waits)]

    with ThreadPoolExecutor(max_workers=waits) as pool:
        steps: list[Future[tuple[int, Any]]] = [
            pool.submit(call, port, token, "POST", f"/ap/v1/agent/tasks/{task_id}/steps")
            for task_id in task_ids
        ]
        # Every step has let its run take a stage: each request is waiting now.
        wait_for(lambda: Run.objects.filter(request__step_budget=1).count() == waits)

        listed = call(port, token, "GET", "/ap/v1/agent/tasks?page_size=100")

        assert not any(step.done() for step in steps)  # none of the waits has ended
        worker = start_worker(**env)
        try:
            answers = [step.result(timeout=90) for step in steps]
        finally:
            stop_process(worker)

    status, page = listed
    assert status == 200 and page["pagination"]["total_items"] == waits
    assert [status for status, _ in answers] == [200] * waits
    assert {step["task_id"] for _, step in answers} == set(task_ids)
    assert all(step["name"] == "router" and step["is_last"] is False for _, step in answers)


def test_a_run_no_worker_starts_in_time_is_a_503_and_stays_queued(redis_queue, tmp_path):
    process, port = start_daphne(
        redis_url=settings.REDIS_URL,
        ATTACHMENT_STORAGE_ROOT=str(tmp_path),
        AGENT_PROTOCOL_STEP_WAIT_SECONDS="1",
    )
    try:
        token = api_token_create(username="alice")
        task_id = task_create(port, token, "Plan my week")

        status, body = call(port, token, "POST", f"/ap/v1/agent/tasks/{task_id}/steps")
    finally:
        stop_process(process)

    assert status == 503
    assert body == {
        "error": "Service Unavailable",
        "message": "the task's run has not started within 1 s (every worker is busy): "
        "execute the step again later",
    }
    assert Run.objects.get().status == Run.Status.QUEUED


def test_a_step_of_a_run_cancelled_before_its_first_stage_is_a_400(server):
    port, _env = server
    token = api_token_create(username="alice")
    task_id = task_create(port, token, "Plan my week")

    with ThreadPoolExecutor(max_workers=1) as pool:
        step = pool.submit(call, port, token, "POST", f"/ap/v1/agent/tasks/{task_id}/steps")
        wait_for(lambda: Run.objects.filter(request__step_budget=1).exists())
        cancelled = call(port, token, "POST", f"/api/tasks/{task_id}/cancel")
        status, body = step.result(timeout=90)

    assert cancelled[0] == 200, cancelled
    assert status == 400 and body["message"].startswith("the task has no step left")


def test_served_without_daphne_the_step_waits_in_the_view(alice, redis_queue, settings):
    """Django's test client (as a WSGI server would) gets the same answer, waited for in the
    view's thread."""
    settings.AGENT_PROTOCOL_STEP_WAIT_SECONDS = 1
    task = alice.post("/ap/v1/agent/tasks", {"input": "Plan my week"}, format="json").json()

    answer = alice.post(f"/ap/v1/agent/tasks/{task['task_id']}/steps", {}, format="json")

    assert answer.status_code == 503, answer.content
    assert answer["Content-Type"] == "application/json"
    assert answer.json()["message"].startswith("the task's run has not started within 1 s")
