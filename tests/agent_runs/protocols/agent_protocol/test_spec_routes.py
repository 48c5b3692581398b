"""The Agent Protocol's spec set under /api/ (docs/spec/agent-protocol-tasks.md), over HTTP
with a real worker: tasks, their control, steps (the agent's and a client's), per-step
artifacts, and every error in the spec's shape."""

import io
import uuid

import pytest

from agent_runs.models import Artifact, Run, Step, Thread
from tests.conftest import send, work_burst

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def create_task(client, text="What is on my calendar?", **extra):
    response = send(lambda: client.post("/api/tasks", {"task": text, **extra}, format="json"))
    assert response.status_code == 200, response.content
    return response.json()["agent"]["id"]


def error_of(response, status):
    assert response.status_code == status, response.content
    body = response.json()
    assert set(body) <= {"error", "message", "details"}
    assert body["error"] and body["message"]
    return body


def test_a_task_runs_at_once_and_reads_back_as_steps_and_an_answer_artifact(
    alice, redis_queue, attachment_root
):
    response = send(
        lambda: alice.post(
            "/api/tasks", {"task": "Plan my week", "workspace": "./ws"}, format="json"
        )
    )
    assert response.status_code == 200
    agent = response.json()["agent"]
    assert agent["status"] == "ACTIVE" and agent["task"] == "Plan my week"
    assert agent["name"] == "Task: Plan my week"
    task_id = agent["id"]
    assert alice.get(f"/api/tasks/{task_id}").json()["status"] == "created"

    work_burst(redis_queue)

    task = alice.get(f"/api/tasks/{task_id}").json()
    assert task["status"] == "completed" and task["input"] == "Plan my week"
    assert task["workspace"] == "./ws"
    assert task["created_at"] <= task["modified_at"]  # the run's end is the task's last change
    assert [cycle["status"] for cycle in task["cycles"]] == ["completed"]
    assert [a["file_name"] for a in task["artifacts"]] == ["answer.md"]

    steps = alice.get(f"/api/tasks/{task_id}/steps").json()
    assert steps["pagination"] == {"total": 3, "page": 1, "pageSize": 20, "totalPages": 1}
    names = [step["name"] for step in steps["steps"]]
    assert names == ["router", "worker", "memory"]
    for step in steps["steps"]:
        assert step["status"] == "completed" and step["source"] == "agent"
        assert step["started_at"] and step["completed_at"] and step["created_at"]
        assert step["started_at"] <= step["completed_at"]
    router, worker, _memory = steps["steps"]
    assert router["output"]["route"] in ("answer", "use_tools", "clarify")
    assert isinstance(worker["output"], str) and worker["output"]
    assert [step["is_last"] for step in steps["steps"]] == [False, False, True]
    assert "latency_ms" in worker["additional_output"]

    artifacts = alice.get(f"/api/tasks/{task_id}/steps/{worker['step_id']}/artifacts").json()
    (artifact,) = artifacts["artifacts"]
    assert artifact["agent_created"] is True and artifact["mime_type"] == "text/markdown"
    download = alice.get(artifact["uri"])
    assert download.status_code == 200
    content = b"".join(download.streaming_content)
    assert content.decode() == worker["output"]
    assert download["Content-Type"] == "text/markdown"
    assert download["Content-Length"] == str(len(content))
    assert download["Content-Disposition"] == 'attachment; filename="answer.md"'


def test_tasks_page_by_the_spec_pagination(alice, bob, redis_queue):
    ids = [create_task(alice, f"task {n}") for n in range(3)]
    create_task(bob, "not alice's")
    page = alice.get("/api/tasks?page=2&pageSize=2").json()
    assert page["pagination"] == {"total": 3, "page": 2, "pageSize": 2, "totalPages": 2}
    assert [task["task_id"] for task in page["tasks"]] == [ids[0]]
    for query in ("page=0", "pageSize=101", "page=x", "pageSize=-1", "page=" + "9" * 5000):
        body = error_of(alice.get(f"/api/tasks?{query}"), 400)
        assert "must be an integer" in body["message"]


def test_a_client_records_its_own_steps_with_the_spec_timestamps(alice, redis_queue):
    task_id = create_task(alice)
    created = alice.post(
        f"/api/tasks/{task_id}/steps",
        {"name": "Analyze", "input": {"action": "analyze"}, "additional_input": {"k": 1}},
        format="json",
    )
    assert created.status_code == 201
    step = created.json()
    assert step["status"] == "created" and step["source"] == "client"
    assert step["input"] == {"action": "analyze"} and step["output"] is None
    assert step["started_at"] is None and step["completed_at"] is None
    url = f"/api/tasks/{task_id}/steps/{step['step_id']}"

    running = alice.patch(url, {"status": "running"}, format="json").json()
    assert running["status"] == "running" and running["started_at"]
    assert running["completed_at"] is None
    done = alice.patch(
        url,
        {"status": "completed", "output": {"summary": "up 15%"}, "is_last": True},
        format="json",
    ).json()
    assert done["status"] == "completed" and done["completed_at"]
    assert done["output"] == {"summary": "up 15%"} and done["is_last"] is True
    assert done["started_at"] == running["started_at"]

    # Forward only; an agent's step is not the client's to change.
    body = error_of(alice.patch(url, {"status": "running"}, format="json"), 409)
    assert body["message"] == "a step cannot go from completed to running"
    error_of(alice.patch(url, {"status": "done"}, format="json"), 400)
    error_of(alice.patch(url, {"is_last": "yes"}, format="json"), 400)
    work_burst(redis_queue)
    agent_step = Step.objects.filter(thread_id=task_id, source="agent").first()
    assert agent_step is not None
    body = error_of(
        alice.patch(
            f"/api/tasks/{task_id}/steps/{agent_step.pk}", {"status": "failed"}, format="json"
        ),
        409,
    )
    assert "the agent's" in body["message"]
    assert Step.objects.get(pk=agent_step.pk).status == "completed"


def test_uploads_are_kept_checked_and_removed(alice, bob, redis_queue, attachment_root, settings):
    task_id = create_task(alice)
    step = alice.post(f"/api/tasks/{task_id}/steps", {"name": "s"}, format="json").json()
    base = f"/api/tasks/{task_id}/steps/{step['step_id']}/artifacts"

    upload = alice.post(
        base,
        {"file": io.BytesIO(b"col\n1\n"), "relative_path": "reports/data.csv"},
        format="multipart",
    )
    assert upload.status_code == 201, upload.content
    artifact = upload.json()
    assert artifact["relative_path"] == "reports/data.csv"
    assert artifact["mime_type"] == "text/csv" and artifact["size_bytes"] == 6
    assert alice.get(f"{base}/{artifact['artifact_id']}").json() == artifact
    stored = Artifact.objects.get(pk=artifact["artifact_id"])
    assert (attachment_root / stored.storage_name).read_bytes() == b"col\n1\n"

    for bad in ("/etc/passwd", "../up", "a/../../b", "a\\b", "x" * 1025):
        response = alice.post(
            base, {"file": io.BytesIO(b"x"), "relative_path": bad}, format="multipart"
        )
        assert "relative_path" in error_of(response, 400)["message"]
    error_of(alice.post(base, {"relative_path": "a"}, format="multipart"), 400)
    settings.ARTIFACT_MAX_BYTES = 4
    error_of(alice.post(base, {"file": io.BytesIO(b"12345")}, format="multipart"), 413)
    assert Artifact.objects.count() == 1
    assert len([p for p in attachment_root.rglob("*") if p.is_file()]) == 1

    # A stranger sees none of it.
    error_of(bob.get(f"{base}/{artifact['artifact_id']}"), 404)
    error_of(bob.get(f"{base}/{artifact['artifact_id']}/download"), 404)
    error_of(bob.delete(f"{base}/{artifact['artifact_id']}"), 404)

    assert alice.delete(f"{base}/{artifact['artifact_id']}").status_code == 204
    assert not (attachment_root / stored.storage_name).exists()
    error_of(alice.get(f"{base}/{artifact['artifact_id']}"), 404)


def test_pause_resume_and_cancel_of_a_queued_task(alice, redis_queue):
    task_id = create_task(alice)
    paused = alice.post(f"/api/tasks/{task_id}/pause")
    assert paused.json() == {"task_id": task_id, "status": "paused"}
    work_burst(redis_queue)  # a paused task does not start
    assert Run.objects.get(thread_id=task_id).status == "paused"
    assert not Step.objects.filter(thread_id=task_id).exists()

    resumed = send(lambda: alice.post(f"/api/tasks/{task_id}/resume"))
    # Under way again from the resume on, though it waits for a worker (spec: running).
    assert resumed.json() == {"task_id": task_id, "status": "running"}
    assert alice.get(f"/api/tasks/{task_id}").json()["status"] == "running"
    listed = alice.get("/api/tasks").json()
    assert [task["status"] for task in listed["tasks"] if task["task_id"] == task_id] == ["running"]
    body = error_of(alice.post(f"/api/tasks/{task_id}/resume"), 409)
    assert body["message"] == "the task is not paused"
    work_burst(redis_queue)
    assert alice.get(f"/api/tasks/{task_id}").json()["status"] == "completed"
    error_of(alice.post(f"/api/tasks/{task_id}/pause"), 409)
    error_of(alice.post(f"/api/tasks/{task_id}/cancel"), 409)

    other = create_task(alice)
    for _ in range(2):  # idempotent
        cancelled = send(lambda: alice.post(f"/api/tasks/{other}/cancel"))
        assert cancelled.json() == {"task_id": other, "status": "cancelled"}


def test_delete_removes_the_task_and_everything_it_holds(alice, bob, redis_queue, attachment_root):
    task_id = create_task(alice)
    work_burst(redis_queue)
    error_of(bob.delete(f"/api/tasks/{task_id}"), 404)
    stored = Artifact.objects.get(thread_id=task_id).storage_name
    assert (attachment_root / stored).exists()
    assert alice.delete(f"/api/tasks/{task_id}").status_code == 204
    assert not Thread.objects.filter(pk=task_id).exists()
    assert not Step.objects.filter(thread_id=task_id).exists()
    assert not (attachment_root / stored).exists()
    error_of(alice.get(f"/api/tasks/{task_id}"), 404)


@pytest.mark.parametrize(
    "body, message",
    [
        ({}, "invalid body: task: Field required"),
        ({"task": ""}, "invalid body: task: String should have at least 1 character"),
        ({"task": "   "}, "invalid body: task: must not be blank"),
        ({"task": 5}, "invalid body: task: Input should be a valid string"),
        ([], "the body must be a JSON object"),
    ],
)
def test_a_bad_task_body_is_a_400_and_stores_nothing(alice, redis_queue, body, message):
    response = alice.post("/api/tasks", body, format="json")
    assert error_of(response, 400)["message"] == message
    assert not Thread.objects.exists()


def test_malformed_json_and_strangers_are_told_in_the_spec_shape(alice, bob, redis_queue):
    for raw in (b"{", b'{"task": NaN}', b'{"task": "a\\u0000b"}', b"[" * 100000):
        response = alice.generic("POST", "/api/tasks", raw, content_type="application/json")
        error_of(response, 400)
    task_id = create_task(alice)
    for path in ("", "/steps", f"/steps/{uuid.uuid4()}", "/pause", "/steps/nope/artifacts"):
        method = bob.post if path == "/pause" else bob.get
        assert error_of(method(f"/api/tasks/{task_id}{path}"), 404)["error"] == "Not Found"
    assert error_of(alice.get("/api/tasks/not-a-uuid"), 404)["message"] == "task not found"
    assert error_of(alice.get(f"/api/tasks/{task_id}/steps/{uuid.uuid4()}"), 404)["message"] == (
        "step not found"
    )
    anonymous = alice.__class__()
    assert error_of(anonymous.get("/api/tasks"), 401)["error"] == "Unauthorized"


def test_the_official_sets_task_post_answers_malformed_json_with_its_400(alice):
    answer = alice.post(
        "/ap/v1/agent/tasks", data=b'{"input": "Plan', content_type="application/json"
    )
    error_of(answer, 400)
    assert not Thread.objects.exists()
