"""The Agent Protocol's WebSocket ``/ws`` over a real socket against daphne, with tasks run by
a real worker: subscribe, replay and live, resume with ``lastEventId``, several tasks on one
socket, access, and the task controls as frames."""

import json
import struct
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import websocket
from django.conf import settings
from django.test import Client

from agent_runs.api.authentication import stream_token_issue
from agent_runs.models import Artifact, RunEvent, Step, Thread
from tests.conftest import post_run, run_input, send, start_model_worker, stop_process
from tests.conftest import work_burst as run_queued_jobs
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

# Journal events that give no frame (outbound_ws.py).
SILENT = {"TEXT_MESSAGE_START", "TEXT_MESSAGE_END", "TOOL_CALL_END"}


class TaskSocket:
    """A WebSocket client of ``/ws``: JSON frames in, keep-alive pings skipped."""

    def __init__(
        self,
        port: int,
        *,
        bearer: str | None = None,
        query: str = "",
        cookie: str | None = None,
        origin: str | None = None,  # the client's default: this server's own origin
    ) -> None:
        headers = [f"Authorization: Bearer {bearer}"] if bearer else []
        headers += [f"Cookie: {cookie}"] if cookie else []
        self.ws = websocket.create_connection(
            f"ws://127.0.0.1:{port}/ws{query}", header=headers, origin=origin, timeout=20
        )
        self.pings = 0
        self.hello: dict[str, Any] = {}  # the first frame when it is not ``connected``

    def send(self, **message: Any) -> None:
        self.ws.send(json.dumps(message))

    def next(self, deadline: float | None = None) -> dict[str, Any]:
        """The next frame but keep-alive pings (which never outlast ``deadline``)."""
        while True:
            frame: dict[str, Any] = json.loads(self.ws.recv())
            if frame["type"] != "ping":
                return frame
            self.pings += 1
            assert deadline is None or time.monotonic() < deadline, "only keep-alives came"

    def until(
        self, done: Callable[[dict[str, Any]], bool], seconds: float = 60
    ) -> list[dict[str, Any]]:
        """Frames up to and including the first for which ``done`` holds, within
        ``seconds``."""
        deadline = time.monotonic() + seconds
        frames = [self.next(deadline)]
        while not done(frames[-1]):
            assert time.monotonic() < deadline, f"no such frame within {seconds} s: {frames}"
            frames.append(self.next(deadline))
        return frames

    def until_all(self, *done: Callable[[dict[str, Any]], bool]) -> list[dict[str, Any]]:
        """Frames up to and including the last of the first frames for which each of
        ``done`` holds, whatever their order."""
        pending = list(done)

        def awaited(frame: dict[str, Any]) -> bool:
            return any(check(frame) for check in pending)

        frames: list[dict[str, Any]] = []
        while pending:
            frames += self.until(awaited)
            pending[:] = [check for check in pending if not check(frames[-1])]
        return frames

    def subscribe(self, task_id: str, **extra: Any) -> None:
        self.send(type="subscribe", agentId=task_id, **extra)
        subscribed = self.next()
        assert subscribed["type"] == "subscribed" and subscribed["agentId"] == task_id

    def quiet(self) -> list[dict[str, Any]]:
        """Whatever comes before the answer to a ping of ours."""
        self.send(type="ping")
        frames = self.until(lambda frame: frame["type"] == "pong")
        return frames[:-1]

    def close_code(self) -> int:
        while True:
            opcode, data = self.ws.recv_data(control_frame=True)
            if opcode == websocket.ABNF.OPCODE_CLOSE:
                code: int = struct.unpack("!H", data[:2])[0]
                return code

    def close(self) -> None:
        self.ws.close()


@pytest.fixture
def connect(daphne_port: int) -> Iterator[Callable[..., TaskSocket]]:
    sockets: list[TaskSocket] = []

    def open_socket(**kwargs: Any) -> TaskSocket:
        sockets.append(TaskSocket(daphne_port, **kwargs))
        hello = sockets[-1].next()
        if hello["type"] == "connected":
            assert hello["timestamp"].endswith("Z")
        else:
            sockets[-1].hello = hello
        return sockets[-1]

    yield open_socket
    for socket in sockets:
        socket.close()


def create_task(client: Any, text: str = "Plan my day") -> str:
    """``POST /api/tasks``: a thread with one queued run whose answer becomes ``answer.md``."""
    response = send(lambda: client.post("/api/tasks", {"task": text}, format="json"))
    assert response.status_code == 200, response.content
    task_id: str = response.json()["agent"]["id"]
    return task_id


def completed(task_id: str) -> Callable[[dict[str, Any]], bool]:
    return lambda frame: frame["type"] == "task.completed" and frame["task_id"] == task_id


def framed_event_ids(task_id: str) -> list[int]:
    """The ids of the task's stored events that give frames, in order."""
    events = (
        RunEvent.objects.filter(thread_id=uuid.UUID(task_id))
        .exclude(type__in=SILENT)
        .order_by("pk")
    )
    return list(events.values_list("pk", flat=True))


def distinct(cursors: list[str]) -> list[int]:
    """The journal events the frames came from, in order (a frame's ``event_id`` is
    ``<event id>.<n>``)."""
    return list(dict.fromkeys(int(cursor.split(".")[0]) for cursor in cursors))


def numbered_within_their_events(frames: list[dict[str, Any]]) -> bool:
    """Each frame's cursor numbers it within its journal event: 1, 2, ... in order."""
    expected: dict[str, int] = {}
    for frame in frames:
        event_id, number = frame["event_id"].split(".")
        expected[event_id] = expected.get(event_id, 0) + 1
        if int(number) != expected[event_id]:
            return False
    return True


def journal_time(event: RunEvent) -> str:
    return event.created_at.isoformat(timespec="milliseconds").replace("+00:00", "Z")


def collapse(types: list[str]) -> list[str]:
    collapsed: list[str] = []
    for kind in types:
        if not (collapsed and kind == collapsed[-1] == "step.running"):
            collapsed.append(kind)
    return collapsed


def test_a_subscriber_follows_a_task_from_created_to_completed_with_its_answer_file(
    alice, alice_token, redis_queue, attachment_root, connect
):
    task_id = create_task(alice)
    live = connect(bearer=alice_token)
    live.subscribe(task_id)
    assert live.quiet() == []  # queued: nothing yet

    run_queued_jobs(redis_queue)
    frames = live.until(completed(task_id))

    assert collapse([frame["type"] for frame in frames]) == [
        "task.created",
        "task.started",
        "step.created",  # router
        "step.started",
        "step.completed",
        "step.created",  # worker
        "step.started",
        "step.running",
        "artifact.created",
        "step.completed",
        "step.created",  # memory
        "step.started",
        "step.completed",
        "task.completed",
    ]
    assert all(frame["task_id"] == task_id for frame in frames)
    assert distinct([frame["event_id"] for frame in frames]) == framed_event_ids(task_id)
    assert numbered_within_their_events(frames)
    # Every frame carries the time its journal event was written.
    times = {
        event.pk: journal_time(event)
        for event in RunEvent.objects.filter(thread_id=uuid.UUID(task_id))
    }
    assert all(frame["timestamp"] == times[distinct([frame["event_id"]])[0]] for frame in frames)
    steps = {str(step.pk): step.name for step in Step.objects.filter(thread_id=uuid.UUID(task_id))}
    assert {frame["step_id"]: frame["data"]["name"] for frame in frames[2:7]} == {
        step_id: name for step_id, name in steps.items() if name in ("router", "worker")
    }
    worker_step = next(step_id for step_id, name in steps.items() if name == "worker")
    running = [frame for frame in frames if frame["type"] == "step.running"]
    assert {frame["step_id"] for frame in running} == {worker_step}
    answer = Artifact.objects.get(thread_id=uuid.UUID(task_id))
    assert "".join(frame["data"]["delta"] for frame in running) == (
        (attachment_root / answer.storage_name).read_text()
    )
    (created,) = [frame for frame in frames if frame["type"] == "artifact.created"]
    assert created == {
        "type": "artifact.created",
        "task_id": task_id,
        "step_id": worker_step,
        "artifact_id": str(answer.pk),
        "data": {
            "file_name": "answer.md",
            "relative_path": "answer.md",
            "mime_type": "text/markdown",
            "size_bytes": answer.size_bytes,
        },
        # The first frame of its step's STEP_FINISHED, whose step.completed comes next.
        "timestamp": frames[frames.index(created) + 1]["timestamp"],
        "event_id": frames[frames.index(created) + 1]["event_id"].replace(".2", ".1"),
    }
    assert frames[frames.index(created) + 1]["type"] == "step.completed"

    # A later subscriber gets the same frames, replayed from the journal: timestamps and
    # cursors included.
    replay = connect(bearer=alice_token)
    replay.subscribe(task_id)
    assert replay.until(completed(task_id)) == frames


def test_a_resume_from_any_frame_gets_every_later_frame_once_and_nothing_earlier(
    alice, alice_token, redis_queue, connect
):
    task_id = create_task(alice)
    run_queued_jobs(redis_queue)
    socket = connect(bearer=alice_token)
    socket.subscribe(task_id)
    frames = socket.until(completed(task_id))
    # An event that gives several frames: RUN_STARTED gives task.created and task.started.
    assert frames[0]["event_id"] == frames[1]["event_id"].replace(".2", ".1")

    for position, frame in enumerate(frames[:-1]):
        socket.subscribe(task_id, lastEventId=frame["event_id"])  # starts the stream again
        assert socket.until(completed(task_id)) == frames[position + 1 :], frame
    socket.subscribe(task_id, lastEventId=frames[-1]["event_id"])
    assert socket.quiet() == []

    # A bare event id, the cursor of earlier releases, resumes after the whole event.
    first_event = frames[0]["event_id"].split(".")[0]
    socket.subscribe(task_id, lastEventId=int(first_event))
    after_first_event = socket.until(completed(task_id))
    assert after_first_event[0]["type"] == "step.created"
    of_first_event = first_event + "."
    assert after_first_event == [f for f in frames if not f["event_id"].startswith(of_first_event)]


def test_a_strangers_task_an_unknown_one_and_a_bad_id_are_not_found_and_send_nothing(
    alice, bob_token, redis_queue, connect
):
    task_id = create_task(alice)
    run_queued_jobs(redis_queue)
    bob = connect(bearer=bob_token)

    for agent_id in (task_id, "9b2f0a4e-8c7d-4e1f-a2b3-c4d5e6f70819", "not-a-uuid"):
        bob.send(type="subscribe", agentId=agent_id)
        assert bob.next() == {
            "type": "error",
            "agentId": agent_id,
            "error": "Not Found",
            "message": "task not found",
        }
    assert bob.quiet() == []


@pytest.mark.parametrize(
    "how",
    [
        {"query": "?token=not-a-stream-token"},
        {"bearer": "not-a-token"},
        {},
    ],
    ids=["bad stream token", "bad bearer token", "no credentials"],
)
def test_a_socket_without_valid_credentials_is_told_and_closed(how, connect):
    socket = connect(**how)

    assert socket.hello == {
        "type": "error",
        "error": "Unauthorized",
        "message": "authentication required: a bearer token, a session or ?token=",
    }
    assert socket.close_code() == 4401


def test_a_stream_token_opens_its_own_task_only(alice, redis_queue, connect):
    task_id = create_task(alice)
    other_task = create_task(alice, "Another task")
    run_queued_jobs(redis_queue)
    alice_user = Thread.objects.get(pk=task_id).owner
    token = stream_token_issue(user=alice_user, thread_id=uuid.UUID(task_id))

    socket = connect(query=f"?token={token}")
    socket.send(type="subscribe", agentId=other_task)
    refused = socket.next()
    socket.subscribe(task_id)
    frames = socket.until(completed(task_id))

    assert refused["type"] == "error" and refused["error"] == "Not Found"
    assert frames[0]["type"] == "task.created" and frames[-1]["type"] == "task.completed"


def test_a_session_counts_on_a_socket_opened_by_a_page_of_this_site_only(
    alice, redis_queue, connect
):
    task_id = create_task(alice)
    run_queued_jobs(redis_queue)
    browser = Client()
    browser.force_login(Thread.objects.get(pk=task_id).owner)
    cookie = f"{settings.SESSION_COOKIE_NAME}={browser.cookies[settings.SESSION_COOKIE_NAME].value}"

    elsewhere = connect(cookie=cookie, origin="https://elsewhere.example")
    refused = (elsewhere.hello["error"], elsewhere.close_code())  # read before daphne drops it
    own_page = connect(cookie=cookie)
    own_page.subscribe(task_id)

    assert refused == ("Unauthorized", 4401)
    assert own_page.until(completed(task_id))[0]["type"] == "task.created"


def model_worker(model: FakeOpenAI, storage: Path) -> Any:
    """A real worker whose three stages all call the loopback model."""
    return start_model_worker(model, ATTACHMENT_STORAGE_ROOT=str(storage))


def test_a_client_that_resubscribes_with_its_last_event_id_gets_every_event_once(
    alice, alice_token, redis_queue, connect, tmp_path
):
    with FakeOpenAI() as model:
        model.delay = 1.0  # each stage's model call
        worker = model_worker(model, tmp_path)
        try:
            task_id = create_task(alice)
            first = connect(bearer=alice_token)
            first.subscribe(task_id)
            before = first.until(
                lambda frame: frame["type"] == "step.started" and frame["data"]["name"] == "worker"
            )
            first.close()  # in the worker stage, its model call in flight

            second = connect(bearer=alice_token)
            second.subscribe(task_id, lastEventId=before[-1]["event_id"])
            after = second.until(completed(task_id))
        finally:
            stop_process(worker)

    assert [frame["type"] for frame in before][:2] == ["task.created", "task.started"]
    assert after[0]["type"] == "step.running"
    assert "task.created" not in [frame["type"] for frame in after]
    ids_before = distinct([frame["event_id"] for frame in before])
    ids_after = distinct([frame["event_id"] for frame in after])
    assert ids_before + ids_after == framed_event_ids(task_id)  # each once, in order
    worker_step = str(Step.objects.get(thread_id=task_id, name="worker").pk)
    # Resumed mid-step, the projection still knows which step the answer streams in.
    running = [frame for frame in after if frame["type"] == "step.running"]
    assert running and {frame["step_id"] for frame in running} == {worker_step}

    # Its event's bare id (step.started was the event's last frame), as earlier releases
    # gave cursors, on one more socket.
    third = connect(bearer=alice_token)
    third.subscribe(task_id, lastEventId=before[-1]["event_id"].split(".")[0])
    assert third.until(completed(task_id)) == after


def test_one_socket_follows_two_tasks_and_an_unsubscribed_one_sends_nothing_more(
    alice, alice_token, redis_queue, attachment_root, connect
):
    first_task = create_task(alice, "First task")
    second_task = create_task(alice, "Second task")
    socket = connect(bearer=alice_token)
    socket.subscribe(first_task)
    socket.subscribe(second_task)
    run_queued_jobs(redis_queue)

    frames = socket.until_all(completed(first_task), completed(second_task))  # run at once
    by_task = {
        task: [frame for frame in frames if frame["task_id"] == task]
        for task in (first_task, second_task)
    }
    for task, task_frames in by_task.items():
        assert task_frames[0]["type"] == "task.created"
        assert task_frames[-1]["type"] == "task.completed"
        assert distinct([frame["event_id"] for frame in task_frames]) == framed_event_ids(task)
    assert len(frames) == sum(len(task_frames) for task_frames in by_task.values())

    socket.send(type="unsubscribe", agentId=first_task)
    unsubscribed = socket.next()
    assert unsubscribed["type"] == "unsubscribed" and unsubscribed["agentId"] == first_task
    # A second run of each task: only the one still followed is heard of.
    for task in (first_task, second_task):
        follow_up = run_input(
            threadId=task, messages=[{"id": "msg-002", "role": "user", "content": "And then?"}]
        )
        post_run(alice, follow_up)
    run_queued_jobs(redis_queue)
    later = socket.until(completed(second_task))
    later += socket.quiet()

    assert {frame["task_id"] for frame in later} == {second_task}
    assert later[0]["type"] == "task.started"  # a later run: started, not created


def test_pausing_and_resuming_a_running_task_are_frames_of_it(
    alice, alice_token, redis_queue, connect, tmp_path
):
    with FakeOpenAI() as model:
        model.delay = 1.0
        worker = model_worker(model, tmp_path)
        try:
            task_id = create_task(alice)
            socket = connect(bearer=alice_token)
            socket.subscribe(task_id)
            socket.until(lambda frame: frame["type"] == "step.started")  # the router's
            alice.post(f"/api/tasks/{task_id}/pause")
            to_pause = socket.until(lambda frame: frame["type"] == "task.paused")
            send(lambda: alice.post(f"/api/tasks/{task_id}/resume"))
            to_end = socket.until(completed(task_id))
        finally:
            stop_process(worker)

    # Parked at the boundary after the router: its step completed, then the task paused.
    assert [frame["type"] for frame in to_pause] == ["step.completed", "task.paused"]
    paused = to_pause[-1]
    run_id = paused["data"]["cycle_id"]
    assert paused["data"] == {"cycle_id": run_id, "reason": "pause", "next_stage": "worker"}
    assert to_end[0]["type"] == "task.resumed"
    assert to_end[0]["data"] == {"cycle_id": run_id, "next_stage": "worker"}
    assert to_end[1]["type"] == "step.created" and to_end[1]["data"] == {"name": "worker"}
    assert "task.started" not in [frame["type"] for frame in to_end]


def test_cancelling_a_running_task_fails_its_step_and_cancels_it(
    alice, alice_token, redis_queue, connect, tmp_path
):
    with FakeOpenAI() as model:
        model.delay = 30  # would answer long after the test is over
        worker = model_worker(model, tmp_path)
        try:
            task_id = create_task(alice)
            socket = connect(bearer=alice_token)
            socket.subscribe(task_id)
            started = socket.until(lambda frame: frame["type"] == "step.started")
            send(lambda: alice.post(f"/api/tasks/{task_id}/cancel"))
            ended = socket.until(lambda frame: frame["type"].startswith("task."))
        finally:
            stop_process(worker)

    router_step = str(Step.objects.get(thread_id=task_id, name="router").pk)
    assert started[-1]["step_id"] == router_step
    assert [(frame["type"], frame.get("step_id")) for frame in ended] == [
        ("step.failed", router_step),
        ("task.cancelled", None),
    ]
    assert ended[0]["data"] == {"name": "router", "code": "cancelled", "message": "run cancelled"}


def test_bad_messages_get_error_frames_and_the_socket_stays_open(
    alice, alice_token, redis_queue, connect
):
    task_id = create_task(alice)
    socket = connect(bearer=alice_token)

    socket.ws.send("{not json")
    malformed = socket.next()
    socket.ws.send("[1, 2]")
    not_an_object = socket.next()
    socket.send(type="dance", agentId=task_id)
    unknown = socket.next()
    socket.send(type="subscribe", agentId=task_id, lastEventId="soon")
    bad_cursor = socket.next()
    socket.send(type="subscribe", agentId=task_id, lastEventId=2**70)
    huge_cursor = socket.next()
    socket.send(type="subscribe", agentId=task_id, lastEventId="5.2.1")
    two_dots = socket.next()
    socket.send(type="subscribe", agentId=task_id, lastEventId="5.")
    no_frame = socket.next()
    socket.send(type="subscribe", agentId=task_id, lastEventId=5.5)
    a_float = socket.next()
    socket.send(type="ping")
    pong = socket.next()

    assert malformed == {"type": "error", "error": "Bad Request", "message": "malformed JSON"}
    assert not_an_object["type"] == "error" and not_an_object["error"] == "Bad Request"
    assert unknown == {
        "type": "error",
        "agentId": task_id,
        "error": "Bad Request",
        "message": "unknown type 'dance'",
    }
    for refused in (bad_cursor, huge_cursor, two_dots, no_frame, a_float):
        assert refused == {
            "type": "error",
            "agentId": task_id,
            "error": "Bad Request",
            "message": "lastEventId must be a frame's event_id (such as 67.1) or an event id",
        }
    assert pong["type"] == "pong" and pong["timestamp"].endswith("Z")


def test_an_idle_subscription_sends_keep_alive_pings(alice, alice_token, redis_queue, connect):
    task_id = create_task(alice)  # queued, and nothing runs it: its stream stays idle
    socket = connect(bearer=alice_token)
    socket.subscribe(task_id)

    pings = [json.loads(socket.ws.recv()) for _ in range(2)]  # every 0.3 s in the test daphne

    assert [ping["type"] for ping in pings] == ["ping", "ping"]
    assert all(ping["timestamp"].endswith("Z") for ping in pings)
