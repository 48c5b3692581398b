"""Double texting: what a new run does when its thread is busy (docs/protocols/multitask.md),
through the REST endpoint ``POST /api/v1/agent/runs`` (``?multitask=`` or the header
``X-Multitask-Strategy``). Real PostgreSQL, Redis and RQ workers; the model is a loopback
OpenAI-compatible server."""

import json
import subprocess
import sys
import threading
import uuid
from functools import partial
from typing import Any

import pytest
from django.conf import settings
from django.test import override_settings

from agent_runs.models import Interrupt, Message, MultitaskStrategy, Run, RunEvent
from billing.models import UsageRecord
from tests.agent_runs.concurrency import at_once_behind_lock
from tests.agent_runs.sse import read_sse
from tests.conftest import (
    run_input,
    send,
    service_env,
    start_worker,
    stop_process,
    wait_for,
    work_burst,
)
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

RUNS = "/api/v1/agent/runs"
ALLOWED = "must be one of: reject, enqueue, interrupt, rollback"


def post(client: Any, body: dict[str, Any], multitask: str | None = None, **headers: str) -> Any:
    path = RUNS if multitask is None else f"{RUNS}?multitask={multitask}"
    return send(lambda: client.post(path, body, format="json", **headers))


def said(text: str, thread_id: str, run_id: str) -> dict[str, Any]:
    return run_input(
        threadId=thread_id,
        runId=run_id,
        messages=[{"id": f"msg-{uuid.uuid4().hex[:12]}", "role": "user", "content": text}],
    )


def started(thread_id: str) -> list[str]:
    """The thread's runs that started, in the order they did."""
    runs = Run.objects.filter(thread_id=thread_id, started_at__isnull=False)
    return list(runs.order_by("started_at").values_list("run_id", flat=True))


def journal(thread_id: str) -> list[tuple[str, str]]:
    """The thread's journal as (runId, type), in the order clients read it."""
    return list(
        RunEvent.objects.filter(thread_id=thread_id)
        .order_by("pk")
        .values_list("run__run_id", "type")
    )


def assert_whole_runs(thread_id: str) -> None:
    """The journal is a concatenation of whole runs, each ending once."""
    order: list[str] = []
    for run_id, _ in journal(thread_id):
        if not order or order[-1] != run_id:
            assert run_id not in order, f"run {run_id} interleaved"
            order.append(run_id)
    for run_id in order:
        types = [kind for rid, kind in journal(thread_id) if rid == run_id]
        assert types[0] == "RUN_STARTED"
        assert sum(kind in ("RUN_FINISHED", "RUN_ERROR") for kind in types) == 1
        assert types[-1] in ("RUN_FINISHED", "RUN_ERROR")


def test_the_strategies_are_a_choices_class_of_the_models():
    assert MultitaskStrategy.values == ["reject", "enqueue", "interrupt", "rollback"]


def test_reject_refuses_a_busy_thread_with_409_and_writes_nothing(alice):
    first = run_input(runId="run-1")
    assert post(alice, first).status_code == 202  # queued: no worker runs it

    refused = post(alice, run_input(threadId=first["threadId"], runId="run-2"), "reject")
    by_header = post(
        alice,
        run_input(threadId=first["threadId"], runId="run-3"),
        HTTP_X_MULTITASK_STRATEGY="reject",
    )

    assert refused.status_code == by_header.status_code == 409
    assert refused.json() == {"detail": "the thread has a run queued, running or paused"}
    assert list(Run.objects.values_list("run_id", flat=True)) == ["run-1"]
    assert Message.objects.count() == 1


def test_reject_on_an_idle_thread_creates_the_run(alice, redis_queue):
    first = run_input(runId="run-1")
    post(alice, first)
    work_burst(redis_queue)

    accepted = post(alice, run_input(threadId=first["threadId"], runId="run-2"), "reject")

    assert accepted.status_code == 202
    assert Run.objects.get(run_id="run-2").multitask == "reject"


@pytest.mark.parametrize(
    ("query", "headers", "field"),
    [
        ("later", {}, "multitask"),
        ("", {"HTTP_X_MULTITASK_STRATEGY": "queue"}, "X-Multitask-Strategy"),
        ("REJECT%20OR%201", {}, "multitask"),
    ],
    ids=["query", "header", "garbage"],
)
def test_an_unknown_strategy_is_400_naming_the_allowed_ones(alice, query, headers, field):
    first = run_input()
    path = f"{RUNS}?multitask={query}" if query else RUNS
    response = send(lambda: alice.post(path, first, format="json", **headers))

    assert response.status_code == 400
    assert response.json() == {"detail": f"{field} {ALLOWED}"}
    assert not Run.objects.exists() and not Message.objects.exists()


def test_enqueue_runs_after_the_threads_runs_in_order(alice, redis_queue):
    first = run_input(runId="run-1")
    post(alice, first)
    for run_id in ("run-2", "run-3"):
        body = run_input(threadId=first["threadId"], runId=run_id)
        assert post(alice, body, HTTP_X_MULTITASK_STRATEGY="enqueue").status_code == 202

    work_burst(redis_queue)

    runs = list(Run.objects.order_by("started_at").values_list("run_id", "status"))
    assert runs == [(f"run-{n}", "completed") for n in (1, 2, 3)]
    assert_whole_runs(first["threadId"])


@override_settings(MULTITASK_DEFAULT="reject")
def test_multitask_default_overrides_the_entry_points_default(alice):
    first = run_input(runId="run-1")
    post(alice, first)

    refused = post(alice, run_input(threadId=first["threadId"], runId="run-2"))
    queued = post(alice, run_input(threadId=first["threadId"], runId="run-3"), "enqueue")

    assert refused.status_code == 409  # /runs enqueues by default
    assert queued.status_code == 202  # the request's own strategy wins


class Follower:
    """A client following the thread's stream across runs (``follow=true``) from before the
    interrupt, in a thread of its own, until it has seen ``ends`` terminal events."""

    def __init__(self, port: int, token: str, thread_id: str, ends: int) -> None:
        self.frames: list[dict[str, Any]] = []

        def read() -> None:
            seen = 0

            def enough(frame: dict[str, Any]) -> bool:
                nonlocal seen
                seen += frame.get("event") in ("RUN_FINISHED", "RUN_ERROR")
                return seen == ends

            stream = read_sse(
                port,
                thread_id,
                token=token,
                query={"follow": "true", "lastEventId": "0"},
                stop_when=enough,
                timeout=60,
            )
            self.frames = stream.events

        self.thread = threading.Thread(target=read)
        self.thread.start()

    def ends(self) -> list[str]:
        self.thread.join(timeout=90)
        assert not self.thread.is_alive()
        return [
            frame["data"]["runId"]
            for frame in self.frames
            if frame["event"] in ("RUN_FINISHED", "RUN_ERROR")
        ]


@pytest.mark.parametrize(("value", "started"), [("Interrupt", True), ("later", False)])
def test_multitask_default_is_checked_when_the_service_starts(value, started):
    outcome = subprocess.run(
        [
            sys.executable,
            "-c",
            "from django.conf import settings; print(settings.MULTITASK_DEFAULT)",
        ],
        cwd=settings.BASE_DIR,
        env={**service_env(MULTITASK_DEFAULT=value), "DJANGO_SETTINGS_MODULE": "config.settings"},
        capture_output=True,
    )

    assert (outcome.returncode == 0) is started
    if started:
        assert outcome.stdout.strip() == b"interrupt"
    else:
        assert b"MULTITASK_DEFAULT must be reject, enqueue, interrupt or rollback" in outcome.stderr


def slow_worker(model: FakeOpenAI) -> Any:
    return start_worker(
        AGENT_WORKER_MODEL="openai/gpt-test",
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY="sk-test",
    )


def test_interrupt_cancels_the_running_run_and_goes_before_the_queued_ones(
    alice, alice_token, redis_queue, daphne_port
):
    thread_id = str(uuid.uuid4())
    with FakeOpenAI() as model:
        model.delay = 30  # the first run's model call would outlast the test
        worker = slow_worker(model)
        try:
            post(alice, said("a long question", thread_id, "run-1"))
            wait_for(lambda: model.requests)  # its model call is in flight
            post(alice, said("queued behind", thread_id, "run-2"))
            follower = Follower(daphne_port, alice_token, thread_id, ends=3)
            model.delay = 0  # the calls made from now on answer at once

            response = post(alice, said("stop, do this", thread_id, "run-3"), "interrupt")
            wait_for(lambda: Run.objects.get(run_id="run-2").status == "completed")
            wait_for(lambda: model.abandoned)  # its model call was stopped, not waited for
            stopped = len(model.abandoned)
        finally:
            stop_process(worker)

    assert response.status_code == 202
    runs = {run.run_id: run for run in Run.objects.all()}
    assert runs["run-1"].status == Run.Status.CANCELLED
    assert stopped == 1
    assert runs["run-3"].status == runs["run-2"].status == Run.Status.COMPLETED
    assert started(thread_id) == ["run-1", "run-3", "run-2"]  # before the queued run
    assert runs["run-3"].multitask == "interrupt" and not runs["run-1"].rolled_back
    assert Message.objects.filter(run=runs["run-1"], role="user").exists()  # kept
    assert_whole_runs(thread_id)
    run_ids = [run_id for run_id, kind in journal(thread_id) if kind == "RUN_STARTED"]
    assert run_ids == ["run-1", "run-3", "run-2"]
    assert [kind for rid, kind in journal(thread_id) if rid == "run-1"][-1] == "RUN_ERROR"
    error = RunEvent.objects.get(run=runs["run-1"], type="RUN_ERROR")
    assert error.payload["code"] == "cancelled"
    assert follower.ends() == ["run-1", "run-3", "run-2"]  # each run's end, once


def test_two_interrupts_at_once_leave_exactly_one_running_the_later_one(
    alice, alice_token, redis_queue, daphne_port
):
    thread_id = str(uuid.uuid4())
    with FakeOpenAI() as model:
        model.delay = 30
        worker = slow_worker(model)
        try:
            post(alice, said("a long question", thread_id, "run-0"))
            wait_for(lambda: model.requests)
            follower = Follower(daphne_port, alice_token, thread_id, ends=3)
            model.delay = 0
            bodies = [said(f"interrupt {n}", thread_id, f"int-{n}") for n in (1, 2)]
            interrupting = f"{RUNS}?multitask=interrupt"
            outcomes = at_once_behind_lock(
                uuid.UUID(thread_id),
                [partial(alice.post, interrupting, body, format="json") for body in bodies],
            )
            wait_for(
                lambda: (
                    not Run.objects.filter(
                        thread_id=thread_id, status__in=("queued", "running")
                    ).exists()
                )
            )
        finally:
            stop_process(worker)

    assert [outcome.status_code for outcome in outcomes] == [202, 202]
    first, second = Run.objects.filter(run_id__startswith="int-").order_by("pk")
    # Defined order: the later interrupt (by the thread's lock) cancelled the earlier one.
    assert first.status == Run.Status.CANCELLED
    assert second.status == Run.Status.COMPLETED
    assert Run.objects.get(run_id="run-0").status == Run.Status.CANCELLED
    assert Message.objects.filter(run=second, role="assistant").exists()
    assert not Message.objects.filter(run=first, role="assistant").exists()
    assert_whole_runs(thread_id)
    assert follower.ends() == ["run-0", first.run_id, second.run_id]


STANDUP = {"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "UTC"}


def waiting_on_an_approval(alice: Any, model: FakeOpenAI, queue: Any) -> tuple[str, Run]:
    """A thread of alice's: a first exchange, then a run that stopped on an approval."""
    thread_id = str(uuid.uuid4())
    post(alice, said("my cat is called Tom", thread_id, "run-1"))
    work_burst(queue)
    model.tool_call_turns = [[("call_c1", "calendar_create", json.dumps(STANDUP))]]
    model.worker_turns = 0
    post(alice, said("put a standup in my calendar", thread_id, "run-2"))
    work_burst(queue)
    waiting = Run.objects.get(run_id="run-2")
    assert Interrupt.objects.get(run=waiting).status == "pending"
    return thread_id, waiting


def test_an_open_interrupt_makes_the_thread_busy(alice, fake_openai, redis_queue):
    thread_id, waiting = waiting_on_an_approval(alice, fake_openai, redis_queue)
    (interrupt,) = waiting.interrupts.all()

    refused = {
        strategy: post(alice, said("never mind", thread_id, f"run-{strategy}"), strategy)
        for strategy in ("reject", "enqueue")
    }
    interrupting = post(alice, said("never mind", thread_id, "run-3"), "interrupt")

    for response in refused.values():
        assert response.status_code == 409
        assert response.json() == {"detail": f"thread has an open interrupt: {interrupt.id}"}
    assert interrupting.status_code == 202
    interrupt.refresh_from_db()
    assert interrupt.status == Interrupt.Status.CANCELLED
    assert interrupt.answer == {"withdrawn": "interrupt"}
    work_burst(redis_queue)
    assert Run.objects.get(run_id="run-3").status == Run.Status.COMPLETED
    waiting.refresh_from_db()
    assert not waiting.rolled_back  # interrupt keeps what it produced


def test_rollback_hides_the_cancelled_runs_messages_from_history_and_the_model(
    alice, fake_openai, redis_queue, staff_client
):
    thread_id, waiting = waiting_on_an_approval(alice, fake_openai, redis_queue)
    billed = UsageRecord.objects.filter(run=waiting).count()
    assert billed > 0
    fake_openai.requests.clear()

    response = post(alice, said("what is my cat called?", thread_id, "run-3"), "rollback")
    work_burst(redis_queue)

    assert response.status_code == 202
    waiting.refresh_from_db()
    assert waiting.rolled_back
    assert Run.objects.get(run_id="run-3").status == Run.Status.COMPLETED
    # The model's context: the first exchange and the new message, not the rolled-back run.
    sent = json.dumps([request["body"]["messages"] for request in fake_openai.requests])
    assert "my cat is called Tom" in sent and "what is my cat called?" in sent
    assert "put a standup in my calendar" not in sent
    history = alice.get("/api/v1/agent/history", {"threadId": thread_id}).json()
    contents = [message["content"] for message in history["messages"]]
    assert "my cat is called Tom" in contents and "what is my cat called?" in contents
    assert "put a standup in my calendar" not in contents
    # Kept for staff, marked; its usage stays billed.
    kept = Message.objects.get(run=waiting, role="user")
    assert kept.content == "put a standup in my calendar"
    assert UsageRecord.objects.filter(run=waiting).count() == billed
    listed = staff_client.get("/admin/agent_runs/run/?rolled_back__exact=1")
    assert [run.run_id for run in listed.context["cl"].result_list] == ["run-2"]
    assert 'run-2 <span class="rolled-back"' in listed.content.decode()
    page = staff_client.get(f"/admin/agent_runs/run/{waiting.pk}/change/").content.decode()
    assert "Rolled back" in page
    messages = staff_client.get("/admin/agent_runs/message/?run__rolled_back__exact=1")
    listed_ids = messages.context["cl"].result_list.values_list("message_id", flat=True)
    assert kept.message_id in listed_ids
    assert not Message.objects.filter(message_id__in=listed_ids, run__run_id="run-1").exists()


def test_rollback_of_a_running_run_cancels_it_and_hides_it(alice, redis_queue):
    thread_id = str(uuid.uuid4())
    post(alice, said("first", thread_id, "run-1"))  # queued, taken as holding the turn
    Run.objects.filter(run_id="run-1").update(status=Run.Status.RUNNING)
    post(alice, said("behind", thread_id, "run-2"))

    response = post(alice, said("instead", thread_id, "run-3"), "rollback")
    work_burst(redis_queue)

    assert response.status_code == 202
    runs = {run.run_id: run for run in Run.objects.all()}
    assert runs["run-1"].status == Run.Status.CANCELLED and runs["run-1"].rolled_back
    assert not runs["run-2"].rolled_back and runs["run-2"].status == Run.Status.COMPLETED
    assert started(thread_id) == ["run-3", "run-2"]
    history = alice.get("/api/v1/agent/history", {"threadId": thread_id}).json()
    assert "first" not in [message["content"] for message in history["messages"]]


def test_a_strangers_thread_is_404_whatever_the_strategy(alice, bob):
    first = run_input(runId="run-1")
    post(alice, first)

    response = post(bob, run_input(threadId=first["threadId"]), "interrupt")

    assert response.status_code == 404
    assert Run.objects.get(run_id="run-1").status == Run.Status.QUEUED


def test_the_ag_ui_conversation_endpoint_takes_the_strategy_too(alice, redis_queue):
    thread_id = str(uuid.uuid4())
    first = {"id": "u1", "role": "user", "content": "first"}

    def turn(run_id: str, *messages: dict[str, Any], query: str = "") -> Any:
        body = {"threadId": thread_id, "runId": run_id, "messages": list(messages)}
        path = f"/api/v1/agent/ag-ui{query}"
        return send(lambda: alice.post(path, body, format="json", HTTP_ACCEPT="application/json"))

    assert turn("run-1", first).status_code == 202  # queued: the thread is busy
    second = {"id": "u2", "role": "user", "content": "second"}
    unknown = turn("run-2", first, second, query="?multitask=soon")
    rejected = turn("run-2", first, second, query="?multitask=reject")
    interrupting = turn("run-2", first, second, query="?multitask=interrupt")
    work_burst(redis_queue)

    assert unknown.status_code == 400
    assert unknown.json() == {"detail": f"multitask {ALLOWED}"}
    assert rejected.status_code == 409
    assert interrupting.status_code == 202
    # Nothing was running: the queued run stays queued, after the new one.
    runs = dict(Run.objects.values_list("run_id", "status"))
    assert runs == {"run-1": "completed", "run-2": "completed"}
    assert started(thread_id) == ["run-2", "run-1"]
