"""The run host (agent_runs/runtime/host.py): many jobs as tasks on one loop, each stopped
alone, a job that outlives its time cancelled, no more held than the concurrency allows."""

import asyncio
import threading
import time
import uuid
from typing import Any

import pytest

from agent_runs.runtime.host import Claim, Ending, HeldJob, RunHost, claim_register, current_job


@pytest.fixture
def host():
    host = RunHost(concurrency=3, db_threads=2)
    host.start()
    yield host
    host.stop_all()
    host.wait_idle(timeout=5)
    host.close()


def submit(host: RunHost, job_id: str, work, timeout: float | None = None) -> dict[str, Any]:
    """Submit ``work`` as a job; the returned dict gets ``task`` once it has ended."""
    outcome: dict[str, Any] = {}
    ended = threading.Event()
    outcome["ended"] = ended

    def done(held: HeldJob, task: "asyncio.Future[Any]") -> None:
        outcome["held"], outcome["task"] = held, task
        ended.set()

    host.submit(HeldJob(job_id=job_id, timeout=timeout), work, done)
    return outcome


def test_many_jobs_wait_at_once_on_one_loop():
    host = RunHost(concurrency=50, db_threads=2)
    host.start()
    try:
        loops: list[asyncio.AbstractEventLoop] = []

        async def wait() -> str:
            loops.append(asyncio.get_running_loop())
            await asyncio.sleep(0.3)
            return "done"

        started = time.monotonic()
        outcomes = [submit(host, f"job-{i}", wait) for i in range(50)]
        for outcome in outcomes:
            assert outcome["ended"].wait(5)
        assert time.monotonic() - started < 2  # side by side, not one after another
        assert {outcome["task"].result() for outcome in outcomes} == {"done"}
        assert len(set(loops)) == 1 and loops[0] is host.loop
        assert host.count() == 0
    finally:
        host.close()


def test_a_stop_cancels_its_job_alone_and_closes_what_it_awaited(host: RunHost):
    closed = threading.Event()

    async def slow_model():
        try:
            yield "first"
            await asyncio.sleep(30)
            yield "never"
        finally:
            closed.set()

    async def relay() -> list[str]:
        got = []
        async for item in slow_model():
            got.append(item)
        return got

    async def other() -> str:
        await asyncio.sleep(0.5)
        return "other finished"

    stopped = submit(host, "job-1", relay)
    bystander = submit(host, "job-2", other)
    time.sleep(0.1)
    started = time.monotonic()
    assert host.stop("job-1")
    assert stopped["ended"].wait(2)
    assert time.monotonic() - started < 1
    assert stopped["task"].cancelled()
    assert stopped["held"].ending == Ending.STOPPED
    assert closed.is_set()
    assert bystander["ended"].wait(2)
    assert bystander["task"].result() == "other finished"
    assert not host.stop("job-1")  # no longer held


def test_a_job_that_outlives_its_timeout_is_cancelled(host: RunHost):
    seen: list[Ending | None] = []

    async def forever() -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            held = current_job()
            seen.append(held.ending if held else None)
            raise

    outcome = submit(host, "slow", forever, timeout=0.2)
    assert outcome["ended"].wait(3)
    assert outcome["task"].cancelled()
    assert seen == [Ending.TIMED_OUT]


def test_no_more_jobs_are_held_than_the_concurrency_allows(host: RunHost):
    release = threading.Event()

    async def held_until_released() -> None:
        while not release.is_set():
            await asyncio.sleep(0.01)

    outcomes = [submit(host, f"job-{i}", held_until_released) for i in range(3)]
    time.sleep(0.1)
    assert host.count() == 3
    assert not host.wait_for_slot(timeout=0.2)  # full: the worker takes no job
    release.set()
    assert host.wait_for_slot(timeout=2)
    for outcome in outcomes:
        assert outcome["ended"].wait(2)


def test_a_job_begins_once_when_its_run_is_claimed_or_else_when_it_ends(host: RunHost):
    """What a worker defers to a job's start (RQ's bookkeeping) comes once: at the claim of
    the job's run, or at its end when it claimed none, and always before its ending."""
    calls: list[tuple[str, str]] = []
    claimed = threading.Event()
    go_on = threading.Event()

    async def run_job() -> None:
        claim_register(Claim(1, uuid.uuid4()))
        claimed.set()
        await asyncio.get_running_loop().run_in_executor(None, go_on.wait, 5)
        claim_register(None)
        claim_register(Claim(1, uuid.uuid4()))  # a second claim: no second beginning

    async def no_claim() -> None:
        await asyncio.sleep(0.01)

    for job_id, work in (("run", run_job), ("other", no_claim)):
        ended = threading.Event()
        held = HeldJob(
            job_id=job_id, timeout=None, begun=lambda h: calls.append((h.job_id, "begun"))
        )

        def done(held: HeldJob, task: "asyncio.Future[Any]", ended=ended) -> None:
            calls.append((held.job_id, "ended"))
            ended.set()

        host.submit(held, work, done)
        if job_id == "run":
            assert claimed.wait(5)
            assert calls == [("run", "begun")]  # at its claim, while it still runs
            go_on.set()
        assert ended.wait(5)
    assert calls == [("run", "begun"), ("run", "ended"), ("other", "begun"), ("other", "ended")]
