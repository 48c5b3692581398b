"""/healthz and /readyz (docs/operations.md), against real PostgreSQL, Redis and workers."""

import json
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.test import Client
from rq import Worker

from agent_runs.models import WorkerBeat
from agent_runs.services.workers import worker_beat
from tests.conftest import DEMO, free_port, start_daphne, start_worker, stop_process, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_beats")]


def readyz(client: Client) -> tuple[int, dict[str, Any]]:
    response = client.get("/readyz")
    return response.status_code, response.json()


@pytest.fixture
def worker(redis_queue: Any) -> Iterator[subprocess.Popen[bytes]]:
    process = start_worker(**DEMO, WORKER_BEAT_SECONDS="1")
    try:
        wait_for(lambda: WorkerBeat.objects.exists(), seconds=30)
        yield process
    finally:
        stop_process(process)


def test_readyz_is_200_with_a_worker_beating(client: Client, worker: Any) -> None:
    status, body = readyz(client)
    assert status == 200, body
    assert body["status"] == "ok"
    assert set(body["checks"]) == {"database", "redis", "workers", "queue"}
    for check in body["checks"].values():
        assert check["ok"] is True and isinstance(check["ms"], float)
    assert body["checks"]["workers"]["detail"].startswith("1 beating")


def test_readyz_is_503_when_no_worker_beats(client: Client, redis_queue: Any) -> None:
    status, body = readyz(client)
    assert status == 503
    assert body["status"] == "unavailable"
    assert body["checks"]["workers"]["ok"] is False
    assert body["checks"]["database"]["ok"] and body["checks"]["redis"]["ok"]


def test_a_beat_older_than_the_stale_window_does_not_count(
    client: Client, settings: Any, redis_queue: Any
) -> None:
    worker_beat(name="gone", hostname="h", pid=1, queues=["runs"])
    assert readyz(client)[0] == 200
    settings.WORKER_STALE_SECONDS = 1
    time.sleep(1.2)
    status, body = readyz(client)
    assert status == 503 and body["checks"]["workers"]["ok"] is False


def test_readyz_is_503_when_the_queue_is_over_its_limit(
    client: Client, settings: Any, redis_queue: Any
) -> None:
    worker_beat(name="busy", hostname="h", pid=1, queues=["runs"])
    settings.READYZ_MAX_QUEUE_DEPTH = 2
    for _ in range(3):  # no worker takes them: they wait in the queue
        redis_queue.enqueue("agent_runs.runtime.jobs.run_execute_job", 0)
    status, body = readyz(client)
    assert status == 503
    assert body["checks"]["queue"] == {**body["checks"]["queue"], "ok": False}
    assert body["checks"]["queue"]["detail"] == "3 waiting (limit 2)"
    assert body["checks"]["workers"]["ok"] is True
    settings.READYZ_MAX_QUEUE_DEPTH = 3
    assert readyz(client)[0] == 200


def test_a_flushed_redis_loses_rq_s_worker_registry_but_not_the_beat(
    client: Client, worker: Any, redis_queue: Any
) -> None:
    wait_for(lambda: Worker.all(connection=redis_queue.connection), seconds=10)
    redis_queue.connection.flushdb()
    assert Worker.all(connection=redis_queue.connection) == []
    time.sleep(1.5)  # a beat or so later
    status, body = readyz(client)
    assert status == 200, body
    assert body["checks"]["workers"]["ok"] is True


def rq_states(queue: Any) -> list[str]:
    return [worker.get_state() for worker in Worker.all(connection=queue.connection)]


def test_a_worker_stopping_cleanly_deletes_its_beat(redis_queue: Any) -> None:
    process = start_worker(**DEMO, WORKER_BEAT_SECONDS="1")
    try:
        wait_for(lambda: WorkerBeat.objects.exists(), seconds=30)
        beat = WorkerBeat.objects.get()
        assert beat.pid == process.pid and beat.queues == "runs"
        # RQ handles SIGTERM (a warm shutdown) once it waits for jobs: before, a stop kills.
        wait_for(lambda: rq_states(redis_queue) == ["idle"], seconds=30)
    finally:
        stop_process(process)
    assert process.returncode == 0
    assert not WorkerBeat.objects.exists()


def http_get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_live_readyz_fails_fast_when_its_redis_dies(tmp_path: Any) -> None:
    redis_port = free_port()
    redis_server = subprocess.Popen(
        ["redis-server", "--port", str(redis_port), "--save", "", "--appendonly", "no"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
    )
    redis_url = f"redis://127.0.0.1:{redis_port}/0"
    daphne, port = start_daphne(redis_url=redis_url)
    worker = start_worker(**DEMO, REDIS_URL=redis_url, WORKER_BEAT_SECONDS="1")
    try:
        url = f"http://127.0.0.1:{port}/readyz"
        wait_for(lambda: http_get(url)[0] == 200, seconds=40)
        body = http_get(url)[1]
        assert body["checks"]["redis"]["ok"] is True

        redis_server.kill()
        redis_server.wait()
        start = time.monotonic()
        status, body = http_get(url)
        elapsed = time.monotonic() - start
        assert status == 503, body
        assert elapsed < 3, elapsed
        assert body["checks"]["redis"]["ok"] is False
        assert body["checks"]["queue"]["ok"] is False
        assert body["checks"]["database"]["ok"] is True
    finally:
        stop_process(worker)
        stop_process(daphne)
        if redis_server.poll() is None:
            stop_process(redis_server)


def test_live_readyz_fails_when_its_redis_takes_no_new_connection(tmp_path: Path) -> None:
    """A Redis whose socket file was removed (a second quick start did it) still answers on
    the connections open to it, but no run can be queued on a new one: /readyz says so."""
    socket_path = tmp_path / "redis.sock"
    redis_server = subprocess.Popen(
        ["redis-server", "--port", "0", "--unixsocket", str(socket_path), "--save", "",
         "--appendonly", "no"],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    wait_for(socket_path.exists, seconds=10)
    redis_url = f"unix://{socket_path}"
    daphne, port = start_daphne(redis_url=redis_url)
    worker = start_worker(**DEMO, REDIS_URL=redis_url, WORKER_BEAT_SECONDS="1")
    try:
        url = f"http://127.0.0.1:{port}/readyz"
        wait_for(lambda: http_get(url)[0] == 200, seconds=40)

        socket_path.unlink()
        status, body = http_get(url)
        assert status == 503, body
        assert body["checks"]["redis"]["ok"] is False
        assert body["checks"]["database"]["ok"] is True
        assert redis_server.poll() is None  # the server itself still runs
    finally:
        stop_process(worker)
        stop_process(daphne)
        stop_process(redis_server)
