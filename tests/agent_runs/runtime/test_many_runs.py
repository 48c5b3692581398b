"""What must not change when one worker process holds many runs at once
(docs/architecture.md, "How a run executes", "Cancel", "Heartbeat and the sweeper", "The
journal"; docs/deployment.md, "Workers").

Real worker processes (``rqworker runs``), real PostgreSQL and Redis, daphne where a stream
is read; the model is the loopback provider of tests/fake_llm.py, slowed down by its
``delay`` so that runs overlap. Each run is on a thread of its own unless a test says
otherwise, and its user message names it (``[<runId>]``), so the provider can tell its
requests apart.
"""

import datetime
import os
import signal
import socket
import struct
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from itertools import pairwise
from pathlib import Path
from typing import Any, TypeVar

import django_rq
import pytest
from django.conf import settings
from django.db import connection, connections
from django.db.models import Count
from rq import Worker
from rq.job import Job, JobStatus
from rq.queue import Queue
from rq.registry import StartedJobRegistry

from agent_runs.models import Run, RunEvent, WorkerBeat
from agent_runs.services.lifecycle import runs_recover
from tests.agent_runs.events.test_journal_integrity import (
    TERMINAL,
    assert_whole_runs,
    thread_journal,
)
from tests.agent_runs.sse import read_sse
from tests.conftest import post_run, run_input, start_daphne, start_worker, stop_process, wait_for
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

T = TypeVar("T")
RUNNING = Run.Status.RUNNING
COMPLETED = Run.Status.COMPLETED
# The ports this module's servers listen on (the loopback provider, daphne).
PORTS = range(2300, 2400)


def port_in_range() -> int:
    """A port of ``PORTS`` nothing listens on now."""
    for port in PORTS:
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free port in {PORTS}")


@pytest.fixture
def model() -> Iterator[FakeOpenAI]:
    with FakeOpenAI(port=port_in_range()) as fake:
        yield fake


@pytest.fixture(scope="module")
def stream_port(django_db_setup: Any, django_db_blocker: Any) -> Iterator[int]:
    server, port = start_daphne(port_in_range(), redis_url=settings.REDIS_URL)
    yield port
    stop_process(server)


def model_worker(model: FakeOpenAI, *, app: str, **env: str) -> subprocess.Popen[bytes]:
    """A real worker whose router and worker models are ``model`` (no retries: a failed call
    fails its run at once), its database connections named ``app``; once it takes jobs."""
    worker = start_worker(
        AGENT_WORKER_MODEL="openai/gpt-test",
        AGENT_ROUTER_MODEL="openai/gpt-test",
        AGENT_MEMORY_MODEL="demo",
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY="sk-test",
        AGENT_MODEL_MAX_RETRIES="0",
        PGAPPNAME=app,
        **env,
    )
    # Its first beat comes after its warm-up, as it starts taking jobs.
    try:
        wait_for(lambda: WorkerBeat.objects.filter(pid=worker.pid).exists(), 60)
    except AssertionError:
        stop_process(worker)
        raise
    return worker


def post_runs(client: Any, run_ids: Sequence[str], thread_id: str | None = None) -> list[str]:
    """Post a run for each id (on a thread of its own unless ``thread_id``); the ids."""
    for run_id in run_ids:
        body = run_input(
            runId=run_id,
            messages=[{"id": f"msg-{run_id}", "role": "user", "content": f"Hi [{run_id}]"}],
        )
        if thread_id is not None:
            body["threadId"] = thread_id
        response = post_run(client, body)
        assert response.status_code == 202, response.content
    return list(run_ids)


def runs(run_ids: Sequence[str]) -> list[Run]:
    by_id = {run.run_id: run for run in Run.objects.filter(run_id__in=run_ids)}
    return [by_id[run_id] for run_id in run_ids]


def statuses(run_ids: Sequence[str]) -> dict[str, str]:
    return {run.run_id: run.status for run in runs(run_ids)}


def count_running(run_ids: Sequence[str]) -> int:
    return Run.objects.filter(run_id__in=run_ids, status=RUNNING).count()


def all_ended(run_ids: Sequence[str]) -> bool:
    return not Run.objects.filter(run_id__in=run_ids, status__in=["queued", "running"]).exists()


def requests_of(model: FakeOpenAI, run_id: str, requests: list[dict[str, Any]] | None = None):
    marker = f"[{run_id}]"
    return [
        request
        for request in (model.requests if requests is None else requests)
        if marker in str(request["body"].get("messages"))
    ]


def job_of(run: Run) -> Job:
    return Job.fetch(str(run.task_id), connection=connection_redis())


def connection_redis() -> Any:
    return django_rq.get_connection(settings.AGENT_RUNS_QUEUE)


def started_registry() -> StartedJobRegistry:
    return StartedJobRegistry(settings.AGENT_RUNS_QUEUE, connection=connection_redis())


def assert_journal_whole(run: Run, last: str = "RUN_FINISHED") -> list[dict[str, Any]]:
    """The run's events: RUN_STARTED first, ``last`` its one terminal event and its last,
    ``seq`` 0..n with ids rising in that order."""
    rows = list(run.events.order_by("id").values_list("id", "seq", "type", "payload"))
    assert [seq for _, seq, _, _ in rows] == list(range(len(rows))), run.run_id
    types = [kind for _, _, kind, _ in rows]
    assert types[0] == "RUN_STARTED" and types[-1] == last, (run.run_id, types)
    assert sum(kind in TERMINAL for kind in types) == 1, (run.run_id, types)
    return [payload for _, _, _, payload in rows]


def overlap_at_most(intervals: list[tuple[datetime.datetime, datetime.datetime]]) -> int:
    """The most intervals that held at one instant."""
    edges = sorted([(start, 1) for start, _ in intervals] + [(end, -1) for _, end in intervals])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def heartbeat_age(run: Run) -> datetime.timedelta:
    """How long after its claim the run's heartbeat was last renewed."""
    assert run.heartbeat_at is not None and run.started_at is not None, run.run_id
    return run.heartbeat_at - run.started_at


def interval(run: Run) -> tuple[datetime.datetime, datetime.datetime]:
    assert run.started_at is not None and run.finished_at is not None, run.run_id
    return run.started_at, run.finished_at


@contextmanager
def sampled(measure: Callable[[], T], every: float = 0.05) -> Iterator[list[T]]:
    """``measure()`` every ``every`` s on a thread of its own while the block runs."""
    samples: list[T] = []
    stop = threading.Event()

    def sample() -> None:
        try:
            while not stop.is_set():
                samples.append(measure())
                stop.wait(every)
        finally:
            connections.close_all()

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield samples
    finally:
        stop.set()
        sampler.join(timeout=5)


def pg_backends(app: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM pg_stat_activity WHERE application_name = %s", [app])
        count: int = cursor.fetchone()[0]
        return count


def redis_clients_of(pid: int) -> int:
    """Redis's clients (CLIENT LIST) that are one of the process's own TCP connections, both
    ends matched: Linux gives one local port to connections to different places (a
    PostgreSQL connection of the worker may share its port with another process's Redis
    client), so the local address alone can count a stranger."""
    ours = tcp_connections(pid)
    return sum(
        (client["addr"], client["laddr"]) in ours for client in connection_redis().client_list()
    )


def tcp_connections(pid: int) -> set[tuple[str, str]]:
    """The (local, remote) addresses (``ip:port``) of the process's IPv4 TCP sockets, from
    Linux's /proc: its descriptors' socket inodes, looked up in its network namespace's
    table."""
    inodes = set()
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        with suppress(OSError):  # closed meanwhile
            target = os.readlink(descriptor)
            if target.startswith("socket:["):
                inodes.add(target[len("socket:[") : -1])
    connections = set()
    for line in Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if fields[9] in inodes:
            connections.add((_proc_address(fields[1]), _proc_address(fields[2])))
    return connections


def _proc_address(field: str) -> str:
    """``ip:port`` of /proc/net/tcp's ``HEX_IP:HEX_PORT``, the ip a native-endian integer."""
    ip, port = field.split(":")
    return f"{socket.inet_ntoa(struct.pack('=I', int(ip, 16)))}:{int(port, 16)}"


def exit_code_within(worker: subprocess.Popen[bytes], seconds: float) -> int:
    try:
        return worker.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        worker.kill()
        worker.wait()
        raise AssertionError(f"the worker did not exit within {seconds} s") from None


# -- 1. many in flight in one process ------------------------------------------------------


def test_one_worker_runs_twenty_runs_at_once_and_each_journal_stays_whole(
    alice, redis_queue, model
):
    model.delay = 1.5  # a run: two calls (router, worker), 3 s and a little
    worker = model_worker(model, app="many-in-flight", WORKER_CONCURRENCY="24")
    try:
        run_ids = [f"many-{i:02d}" for i in range(20)]
        with sampled(lambda: started_registry().count) as held:
            posted = time.monotonic()
            post_runs(alice, run_ids)
            wait_for(lambda: count_running(run_ids) == 20, 10)
            wait_for(lambda: all_ended(run_ids), 30)
            took = time.monotonic() - posted
            wait_for(lambda: started_registry().count == 0, 5)
    finally:
        stop_process(worker)

    assert statuses(run_ids) == dict.fromkeys(run_ids, COMPLETED)
    ended = runs(run_ids)
    # Each run took its two model calls' time, and they all ran at the same instant.
    assert all(end - start >= datetime.timedelta(seconds=3) for start, end in map(interval, ended))
    assert overlap_at_most([interval(run) for run in ended]) == 20
    assert took < 20 * 3.0 / 4, f"20 runs of 3 s took {took:.1f} s"
    assert max(held) > 1, "RQ saw one job at a time"
    assert started_registry().count == 0
    jobs = [job_of(run) for run in ended]
    assert {job.get_status() for job in jobs} == {JobStatus.FINISHED}
    # Each job's start was recorded as RQ's own worker records it: started by this worker,
    # and taken off the queue's intermediate list.
    assert all(job.started_at is not None and job.worker_name for job in jobs)
    runs_queue = Queue(settings.AGENT_RUNS_QUEUE, connection=connection_redis())
    assert connection_redis().llen(runs_queue.intermediate_queue_key) == 0
    for run in ended:
        assert assert_whole_runs(thread_journal(str(run.thread_id))) == [run.run_id]
        assert_journal_whole(run)
    assert len(model.requests) == 40  # a router and a worker call each, no retry
    # The journal writer wrote several runs' events in one statement (one now() each).
    rounds = (
        RunEvent.objects.filter(run__in=ended)
        .values("created_at")
        .annotate(runs=Count("run", distinct=True))
    )
    assert max(round["runs"] for round in rounds) > 1


# -- 2. a thread's runs one at a time, in order --------------------------------------------


def test_runs_of_one_thread_still_run_one_at_a_time_in_order_beside_other_threads(
    alice, redis_queue, model
):
    model.delay = 0.4  # a run: about 1 s
    worker = model_worker(model, app="many-ordered", WORKER_CONCURRENCY="20")
    threads = [str(uuid.uuid4()) for _ in range(4)]
    lines = {thread: [f"t{t}-run-{n}" for n in range(1, 4)] for t, thread in enumerate(threads)}
    try:
        # Posted round by round: every thread has a run queued behind its first one.
        for n in range(3):
            for thread in threads:
                post_runs(alice, [lines[thread][n]], thread_id=thread)
        every = [run_id for line in lines.values() for run_id in line]
        wait_for(lambda: all_ended(every), 30)
    finally:
        stop_process(worker)

    assert statuses(every) == dict.fromkeys(every, COMPLETED)
    for thread, line in lines.items():
        ordered = runs(line)
        assert [run.created_at for run in ordered] == sorted(run.created_at for run in ordered)
        for before, after in pairwise(ordered):
            assert interval(before)[1] <= interval(after)[0], (before.run_id, after.run_id)
        assert assert_whole_runs(thread_journal(thread)) == line
        for run in ordered:
            assert_journal_whole(run)
    # One run of each thread at a time, the threads side by side.
    assert overlap_at_most([interval(run) for run in runs(every)]) == len(threads)


# -- 3. cancel one of many -----------------------------------------------------------------


def test_cancelling_one_of_many_runs_stops_it_alone(
    alice, alice_token, redis_queue, model, stream_port
):
    model.delay = 2.5  # a run: 5 s and a little
    worker = model_worker(model, app="many-cancel", WORKER_CONCURRENCY="20")
    run_ids = [f"cancel-{i:02d}" for i in range(16)]
    victim = run_ids[5]
    try:
        post_runs(alice, run_ids)
        wait_for(lambda: count_running(run_ids) == 16, 10)
        wait_for(lambda: requests_of(model, victim), 10)  # its model call is in flight
        started = time.monotonic()
        response = alice.post(f"/api/v1/agent/runs/{victim}/cancel")
        took = time.monotonic() - started
        cancelled_at = Run.objects.get(run_id=victim)
        others_running = count_running(run_ids)
        wait_for(lambda: model.abandoned, 5)
        wait_for(lambda: all_ended(run_ids), 30)
    finally:
        stop_process(worker)

    assert response.status_code == 200 and response.json()["status"] == "cancelled"
    assert took < 1.0, f"the cancel took {took:.2f} s"
    assert cancelled_at.status == Run.Status.CANCELLED
    assert others_running == 15
    run = Run.objects.get(run_id=victim)
    journal = assert_journal_whole(run, last="RUN_ERROR")
    assert journal[-1]["code"] == "cancelled"
    # Its model request was closed, and only its.
    assert [requests_of(model, victim, model.abandoned)] == [model.abandoned]
    assert job_of(run).get_status() == JobStatus.STOPPED
    rest = [run_id for run_id in run_ids if run_id != victim]
    assert statuses(rest) == dict.fromkeys(rest, COMPLETED)
    for other in runs(rest):
        assert_journal_whole(other)
        assert job_of(other).get_status() == JobStatus.FINISHED
    stream = read_sse(
        stream_port, str(run.thread_id), token=alice_token, query={"lastEventId": "0"}
    )
    assert stream.types[0] == "RUN_STARTED" and stream.types[-1] == "RUN_ERROR"
    assert stream.events[-1]["data"]["code"] == "cancelled"


# -- 4. a run whose provider fails fails alone ---------------------------------------------


def test_a_run_whose_provider_fails_fails_alone(alice, redis_queue, model):
    model.delay = 0.5
    run_ids = [f"fails-{i:02d}" for i in range(12)]
    failing = run_ids[7]
    model.failing_text = f"[{failing}]"
    worker = model_worker(model, app="many-failing", WORKER_CONCURRENCY="20")
    try:
        post_runs(alice, run_ids)
        wait_for(lambda: all_ended(run_ids), 30)
    finally:
        stop_process(worker)

    run = Run.objects.get(run_id=failing)
    assert run.status == Run.Status.FAILED
    assert assert_journal_whole(run, last="RUN_ERROR")[-1]["code"] == "model_error"
    assert "500" in run.error
    assert len(requests_of(model, failing)) == 1  # its router's call, not tried again
    rest = [run_id for run_id in run_ids if run_id != failing]
    assert statuses(rest) == dict.fromkeys(rest, COMPLETED)
    for other in runs(rest):
        assert_journal_whole(other)
    assert overlap_at_most([interval(run) for run in runs(run_ids)]) > 1


# -- 5. SIGKILL with many in flight --------------------------------------------------------


def test_a_killed_workers_runs_fail_as_worker_lost_and_the_survivors_runs_complete(
    alice, redis_queue, model, settings
):
    model.delay = 4.0  # a run: 8 s, far beyond the stale time
    beats = {
        "WORKER_CONCURRENCY": "10",
        "AGENT_RUN_HEARTBEAT_SECONDS": "1",
        "AGENT_RUN_STALE_SECONDS": "3",
        "AGENT_RUN_SWEEP_SECONDS": "5",  # the least it may be
    }
    settings.AGENT_RUN_STALE_SECONDS = 3
    doomed = model_worker(model, app="many-killed", **beats)
    survivor = model_worker(model, app="many-survivor", **beats)
    run_ids = [f"kill-{i:02d}" for i in range(20)]
    try:
        post_runs(alice, run_ids)
        wait_for(lambda: count_running(run_ids) == 20, 10)
        names = {run.run_id: job_of(run).worker_name for run in runs(run_ids)}
        held = {
            name: sorted(r for r, n in names.items() if n == name) for name in set(names.values())
        }
        assert sorted(map(len, held.values())) == [10, 10], held
        doomed_name = WorkerBeat.objects.get(pid=doomed.pid).name
        lost, kept = held[doomed_name], [r for r in run_ids if r not in held[doomed_name]]

        doomed.send_signal(signal.SIGKILL)
        doomed.wait()
        killed = time.monotonic()
        time.sleep(3.5)  # past the stale time: the survivor has beaten its runs meanwhile
        failed, _ = runs_recover()
        recovered = time.monotonic() - killed
        after_sweep = statuses(run_ids)
        beaten = [heartbeat_age(run) for run in runs(kept)]
        wait_for(lambda: all_ended(run_ids), 30)
    finally:
        stop_process(survivor)
        if doomed.poll() is None:
            doomed.kill()

    assert failed == 10 and recovered < 3 + 5
    assert {after_sweep[r] for r in lost} == {Run.Status.FAILED}
    # Alive, their heartbeats renewed since their claim: the sweep left them alone.
    assert {after_sweep[r] for r in kept} == {RUNNING}
    assert min(beaten) >= datetime.timedelta(seconds=2), beaten
    for run in runs(lost):
        assert run.status == Run.Status.FAILED
        assert assert_journal_whole(run, last="RUN_ERROR")[-1]["code"] == "worker_lost"
    assert statuses(kept) == dict.fromkeys(kept, COMPLETED)
    for run in runs(kept):
        assert_journal_whole(run)
    assert count_running(run_ids) == 0


def test_a_surviving_worker_with_every_slot_taken_still_sweeps_a_killed_workers_runs(
    alice, redis_queue, model
):
    model.delay = 10.0  # a run: 20 s, far beyond the sweep window
    beats = {
        "WORKER_CONCURRENCY": "4",
        "AGENT_RUN_HEARTBEAT_SECONDS": "1",
        "AGENT_RUN_STALE_SECONDS": "2",
        "AGENT_RUN_SWEEP_SECONDS": "5",
    }
    doomed = model_worker(model, app="many-killed-full", **beats)
    survivor = model_worker(model, app="many-survivor-full", **beats)
    run_ids = [f"full-{i}" for i in range(8)]
    try:
        post_runs(alice, run_ids)
        wait_for(lambda: count_running(run_ids) == 8, 10)  # four each: every slot taken
        doomed.kill()
        doomed.wait()
        failed = Run.objects.filter(run_id__in=run_ids, status=Run.Status.FAILED)
        # The survivor sweeps within the stale time and a sweep interval (and a little).
        wait_for(lambda: failed.count() == 4, 2 + 5 + 2)
    finally:
        survivor.kill()  # its own runs would hold a warm stop for 20 s
        survivor.wait()


# -- 6. SIGTERM: a warm stop, then a cold one ----------------------------------------------


def test_a_warm_stop_finishes_the_held_runs_and_a_second_signal_fails_them(
    alice, redis_queue, model
):
    model.delay = 1.0  # a run: 2 s and a little
    warm = model_worker(model, app="many-warm", WORKER_CONCURRENCY="4")
    first = [f"warm-{i}" for i in range(6)]
    try:
        post_runs(alice, first)
        wait_for(lambda: count_running(first) == 4, 10)
        held = [run.run_id for run in runs(first) if run.status == RUNNING]
        warm.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        warm_code = exit_code_within(warm, 15)
        warm_took = time.monotonic() - stopped
    finally:
        stop_process(warm)
    waiting = [run_id for run_id in first if run_id not in held]
    assert warm_code == 0
    assert statuses(held) == dict.fromkeys(held, COMPLETED)
    for run in runs(held):
        assert_journal_whole(run)
    assert statuses(waiting) == dict.fromkeys(waiting, Run.Status.QUEUED)
    assert set(redis_queue.job_ids) == {str(run.task_id) for run in runs(waiting)}
    assert warm_took > 0.5  # it waited for its runs

    # Another worker takes the queued runs; stopped cold, it fails what it holds.
    model.delay = 30
    cold = model_worker(model, app="many-cold", WORKER_CONCURRENCY="4")
    second = [*waiting, *post_runs(alice, ["cold-0", "cold-1"])]
    try:
        wait_for(lambda: count_running(second) == 4, 10)
        wait_for(lambda: len(model.requests) >= len(held) * 2 + 4, 10)
        cold.send_signal(signal.SIGTERM)
        time.sleep(1.2)  # RQ takes a second signal within a second for the first's echo
        cold.send_signal(signal.SIGTERM)
        stopped = time.monotonic()
        exit_code_within(cold, 10)
        cold_took = time.monotonic() - stopped
    finally:
        stop_process(cold)

    assert cold_took < 5
    assert statuses(second) == dict.fromkeys(second, Run.Status.FAILED)
    for run in runs(second):
        assert assert_journal_whole(run, last="RUN_ERROR")[-1]["code"] == "worker_lost"
        assert job_of(run).get_status() == JobStatus.FAILED
    assert started_registry().count == 0
    wait_for(lambda: len(model.abandoned) == 4, 5)  # their model calls were closed


def test_a_worker_stopped_cold_leaves_rqs_worker_registry(alice, redis_queue, model):
    model.delay = 30
    worker = model_worker(model, app="many-cold-registry", WORKER_CONCURRENCY="4")
    try:
        post_runs(alice, ["cold-registry"])
        wait_for(lambda: model.requests, 10)
        worker.send_signal(signal.SIGTERM)
        time.sleep(1.2)  # RQ takes a second signal within a second for the first's echo
        worker.send_signal(signal.SIGTERM)
        exit_code_within(worker, 10)
    finally:
        stop_process(worker)

    assert Run.objects.get(run_id="cold-registry").status == Run.Status.FAILED
    # As after a warm stop, or RQ's own cold stop: the worker is gone from RQ's registry.
    assert Worker.all(connection=connection_redis()) == []


def worker_states() -> list[str]:
    return [worker.get_state() for worker in Worker.all(connection=connection_redis())]


def test_rqs_registry_shows_the_worker_busy_while_it_holds_runs_and_idle_after(
    alice, redis_queue, model
):
    """django-rq's dashboard tells the truth: a worker is ``busy`` while it holds a run,
    even as its loop waits for more jobs, and ``idle`` once it holds none (a tenth of a
    second after its last job ended)."""
    model.delay = 2
    worker = model_worker(model, app="many-states", WORKER_CONCURRENCY="4")
    try:
        wait_for(lambda: worker_states() == ["idle"], 10)
        post_runs(alice, ["state-1", "state-2"])
        wait_for(lambda: len(model.requests) >= 2, 10)
        assert worker_states() == ["busy"]
        wait_for(lambda: all_ended(["state-1", "state-2"]), 30)
        wait_for(lambda: worker_states() == ["idle"], 10)
        assert set(statuses(["state-1", "state-2"]).values()) == {COMPLETED}
    finally:
        stop_process(worker)


def test_a_suspended_worker_takes_no_job_until_resumed(alice, redis_queue, model):
    """``rq suspend`` stops the worker taking jobs (RQ's check, which the worker makes at
    most once a second), though it holds runs and its loop goes on without waiting for
    them: once the wait for a job it was in when suspended is over (RQ checks between
    waits); ``rq resume`` lets it go on."""
    from rq.suspension import resume, suspend

    worker = model_worker(model, app="many-suspend")
    try:
        suspend(connection_redis())
        time.sleep(1.5)
        post_runs(alice, ["suspended-1"])  # taken by the wait it was in, as RQ does
        wait_for(lambda: all_ended(["suspended-1"]), 30)
        time.sleep(1.5)  # its loop has checked since (a second after its last check)
        post_runs(alice, ["suspended-2"])
        time.sleep(2)
        assert statuses(["suspended-2"]) == {"suspended-2": Run.Status.QUEUED}
        resume(connection_redis())
        wait_for(lambda: all_ended(["suspended-2"]), 30)
        assert statuses(["suspended-2"]) == {"suspended-2": COMPLETED}
    finally:
        resume(connection_redis())
        stop_process(worker)


# -- 7. bounded connections ----------------------------------------------------------------


def test_a_worker_holding_many_runs_holds_a_bounded_number_of_connections(
    alice, redis_queue, model
):
    db_threads = 4
    model.delay = 1.5
    app = "many-connections"
    worker = model_worker(
        model, app=app, WORKER_CONCURRENCY="24", WORKER_DB_THREADS=str(db_threads)
    )
    run_ids = [f"conn-{i:02d}" for i in range(24)]
    try:
        idle_redis = redis_clients_of(worker.pid)
        with (
            sampled(lambda: pg_backends(app)) as postgres,
            sampled(lambda: redis_clients_of(worker.pid)) as redis,
        ):
            post_runs(alice, run_ids)
            wait_for(lambda: count_running(run_ids) == 24, 10)
            wait_for(lambda: len(model.requests) >= 24, 10)
            busy = (pg_backends(app), redis_clients_of(worker.pid))
            wait_for(lambda: all_ended(run_ids), 30)
    finally:
        stop_process(worker)

    assert statuses(run_ids) == dict.fromkeys(run_ids, COMPLETED)
    # PostgreSQL: its database threads' connections, the journal writer's, the beats' and
    # the main thread's; not one per run.
    assert busy[0] >= 1 and max(postgres) <= db_threads + 5, (busy, postgres)
    # Redis: RQ's four (its loop, the job beats, the thread telling RQ how jobs ended, its
    # commands' subscription), the journal writer's one, and the journal's pool: one per
    # database thread (a terminal event's entry, the next run's enqueue) and the main
    # thread's sweeps'; not one per run.
    assert busy[1] >= 1 and max(redis) <= db_threads + 6, (idle_redis, busy, redis)
