"""The RQ worker for runs: one process holds many runs at once, without forking.

RQ's workers run one job at a time (a fork per job, or in process); a run spends nearly all
its life waiting for its model, so this worker takes up to ``WORKER_CONCURRENCY`` jobs and
runs each as a task on one event loop (agent_runs/runtime/host.py), their database work on
``WORKER_DB_THREADS`` threads. Its main thread is RQ's own loop: it takes a job whenever a
slot is free, registers it with RQ as started (its registries and dashboard show every job
the worker holds), and hands it to the loop; a thread of its own tells RQ how each ended.

What a work-horse gave, it gives in-process, per job:
- **cancel**: RQ's stop-job command cancels the job's task, so the model call in flight
  stops at once; the job is then ``stopped`` in RQ.
- **job timeout**: a job that outlives its timeout is cancelled, and its run fails with
  ``RUN_ERROR`` ``timeout``.
- **liveness**: a thread beats every held job's heartbeat, in Redis for RQ and in
  PostgreSQL for the sweeper (``runs_recover``: one statement for all the worker's runs),
  which fails only runs whose worker died, whatever Redis has lost. A job whose run is no
  longer its own (cancelled, or failed by the sweeper) is stopped.
- **stopping**: a warm stop (SIGTERM, SIGINT) takes no more jobs and lets the held ones
  finish; a second signal (a cold stop) cancels them, and their runs fail with
  ``worker_lost``.

And a thread beats the worker's own heartbeat in PostgreSQL (``WorkerBeat``, what
``/readyz`` counts), every ``WORKER_BEAT_SECONDS`` from start to a clean stop, whether it runs
a job or waits for one; with ``WORKER_METRICS_PORT`` set, a thread serves its metrics.
"""

import asyncio
import contextlib
import datetime
import gc
import inspect
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from http.server import ThreadingHTTPServer
from typing import Any, TypeVar

from django.conf import settings
from django.db import DatabaseError, close_old_connections
from django.db import connection as db_connection
from redis.exceptions import RedisError
from rq import SimpleWorker
from rq.command import parse_payload
from rq.exceptions import StopRequested
from rq.executions import Execution
from rq.job import Job
from rq.queue import Queue
from rq.timeouts import JobTimeoutException, TimerDeathPenalty
from rq.utils import now
from rq.worker import WorkerStatus

import agent_runs.runtime.jobs  # noqa: F401 - preloaded on purpose, see the module docstring
from agent_runs import metrics
from agent_runs.events.writer import close_event_connection
from agent_runs.push.services import push_deliveries_enqueue_due
from agent_runs.runtime import agentscope_tuning
from agent_runs.runtime.agents import WORKER_SYSTEM_PROMPT, conversation, worker_reply
from agent_runs.runtime.async_bridge import drain
from agent_runs.runtime.chat_models import chat_model_for
from agent_runs.runtime.demo_model import DEMO_MODEL_ID
from agent_runs.runtime.execution import run_execute, run_start_soon
from agent_runs.runtime.host import Ending, HeldJob, RunHost
from agent_runs.runtime.openai_compatible import provider_clients_close
from agent_runs.runtime.sdk_models import sdk_clients_close
from agent_runs.runtime.tracing import worker_tracing_start
from agent_runs.services.automations import automations_fire_due
from agent_runs.services.interrupts import interrupts_expire
from agent_runs.services.lifecycle import runs_recover
from agent_runs.services.queue import RUN_JOB
from agent_runs.services.run_claim import runs_heartbeat
from agent_runs.services.workers import worker_beat, worker_beat_end, worker_beats_prune
from agent_runs.tracing import tracing_flush

logger = logging.getLogger(__name__)
T = TypeVar("T")

# The rows of workers that died without a clean stop are deleted after this long.
_DEAD_WORKER_ROWS_KEPT = datetime.timedelta(days=1)
_STOP_COMMANDS = {"stop-job", "stop-execution"}
# RQ's loop beats the worker's heartbeat no more often than this (``RunWorker.heartbeat``).
_HEARTBEAT_SKIP_SECONDS = 1.0
# How often RQ's loop asks Redis whether ``rq suspend`` stopped the workers taking jobs.
_SUSPENSION_CHECK_SECONDS = 1.0
# How long a worker holds no job before RQ's registry shows it idle.
_IDLE_AFTER_SECONDS = 0.1


class RunWorker(SimpleWorker):
    # The job callbacks run on the thread that tells RQ how a job ended, where SIGALRM
    # cannot reach: a timer stops a callback that hangs.
    death_penalty_class = TimerDeathPenalty

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        sweep = settings.AGENT_RUN_SWEEP_SECONDS
        kwargs["maintenance_interval"] = sweep
        # RQ waits for jobs for (worker_ttl - 15) s before its loop comes round to the
        # maintenance tasks: make that the sweep interval.
        kwargs["worker_ttl"] = min(kwargs.get("worker_ttl") or sweep + 15, sweep + 15)
        kwargs.setdefault("job_monitoring_interval", settings.AGENT_RUN_HEARTBEAT_SECONDS)
        super().__init__(*args, **kwargs)
        agentscope_tuning.apply()
        self._burst = False
        self._waiting = False
        self._last_beat = -_HEARTBEAT_SKIP_SECONDS  # when RQ's loop last beat (monotonic)
        self._suspension_checked = -_SUSPENSION_CHECK_SECONDS  # when RQ's loop last asked
        self._host = RunHost(
            concurrency=settings.WORKER_CONCURRENCY, db_threads=settings.WORKER_DB_THREADS
        )
        # Tells RQ how each job ended, one at a time (RQ's bookkeeping is not thread-safe).
        self._finisher = ThreadPoolExecutor(max_workers=1, thread_name_prefix="rq-finish")

    def work(self, *args: Any, **kwargs: Any) -> bool:
        self._burst = bool(kwargs.get("burst") or (args and args[0]))
        self._host.start()
        # A demo reply loads and exercises the code every run uses before the first job.
        model = chat_model_for(DEMO_MODEL_ID)
        reply = worker_reply(
            model=model,
            messages=conversation((), "warm-up"),
            tools=(),
            system_prompt=WORKER_SYSTEM_PROMPT,
            max_iters=1,
        )
        self._host.run(drain(reply))
        # With OTEL_EXPORTER_OTLP_ENDPOINT set, each run is a trace (after the warm-up,
        # which is none).
        worker_tracing_start()
        self._recover()
        # What is loaded by now lives as long as the process: keep it out of every later
        # garbage collection's walk.
        gc.collect()
        gc.freeze()
        exporter = self._serve_metrics()
        stopped = threading.Event()
        threads = [
            threading.Thread(target=target, args=(stopped,), name=name, daemon=True)
            for target, name in ((self._beat_worker, "worker-beat"), (self._beat, "job-beat"))
        ]
        for thread in threads:
            thread.start()
        try:
            return bool(super().work(*args, **kwargs))
        finally:
            stopped.set()
            for thread in threads:
                thread.join(timeout=5)
            self._end_beats()
            if exporter is not None:
                exporter.shutdown()
                exporter.server_close()
            self._finisher.shutdown(wait=True)
            self._host.run(close_event_connection())
            self._host.run(provider_clients_close())
            self._host.run(sdk_clients_close())
            self._host.close()
            tracing_flush()

    def _shutdown(self) -> None:
        """A warm stop (SIGTERM, SIGINT): no more jobs are taken. RQ's own stops at once only
        when its worker looks idle, which says nothing here (jobs start and end on other
        threads): while the main thread waits for a slot or a job, the wait ends now; the
        held jobs are let finish (``teardown``)."""
        self._stop_requested = True
        self.set_shutdown_requested_date()
        if self._waiting:
            raise StopRequested()

    def teardown(self) -> None:
        try:
            self._release_held()  # while RQ's commands still reach the jobs held
        finally:
            super().teardown()  # a cold stop too leaves RQ's registry of workers

    def _release_held(self) -> None:
        """The worker stops: let the jobs it holds finish (a warm stop); at a second signal
        (a cold stop, ``SystemExit`` here) cancel them, and wait for them to unwind."""
        try:
            while self._host.count():
                if self._host.wait_idle(timeout=1.0):
                    break
                self.heartbeat()
        except SystemExit:
            logger.warning("cold stop: cancelling the %d jobs held", self._host.count())
            self._host.stop_all(Ending.SHUTDOWN)
            self._host.wait_idle(timeout=30)
            raise
        finally:
            self._finisher.submit(lambda: None).result()  # every ending is told to RQ

    # -- taking jobs -----------------------------------------------------------------

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[Job, Queue] | None:
        """Wait for a free slot, then for a job. In burst mode an empty queue ends the
        work only once no job is held (a held job may enqueue the next run of its thread)."""
        self._waiting = True  # a stop signal now ends the wait (``_shutdown``)
        try:
            return self._dequeue(timeout, max_idle_time)
        finally:
            self._waiting = False

    def _dequeue(self, timeout: int | None, max_idle_time: int | None) -> tuple[Job, Queue] | None:
        while not self._host.wait_for_slot(timeout=1.0):
            if self._stop_requested:
                raise StopRequested()
            self.heartbeat()
            # A worker full of long runs still sweeps: a dead worker's runs are not left
            # running for as long as these take.
            if self.should_run_maintenance_tasks:
                self.run_maintenance_tasks()
        while True:
            result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
            if result is not None or not self._burst or not self._host.count():
                return result
            self._host.wait_for_change(timeout=1.0)

    def execute_job(self, job: Job, queue: Queue) -> None:
        """Hand the job to the loop, and register it with RQ as started on the finishing
        thread, before it is told how the job ended (this returns at once: RQ's loop takes
        the next job while this one runs, and the run does not wait for RQ's bookkeeping).
        A run's job is registered once its run is claimed (``HeldJob.begin``): RQ's
        bookkeeping, on its own thread, took the interpreter from the run's start (about
        3 ms of a loaded hour's first token), and the claim is what says the run is this
        job's. A run's claim begins here, on a database thread (``run_start_soon``), while
        the loop starts the job's task, which waits for it."""
        job.started_at = now()
        held = HeldJob(
            job_id=job.id,
            timeout=job.timeout or None,
            payload=[job, queue, None],
            begun=lambda begun: self._finisher.submit(self._register, begun),
        )
        if job.func_name == RUN_JOB and len(job.args) == 1 and not job.kwargs:
            # A run: its claim begins now, on a database thread, while the loop starts its
            # task.
            run_pk = job.args[0]
            starting = run_start_soon(run_pk, self._host)
            self._host.submit(
                held, lambda: run_execute(run_pk=run_pk, starting=starting), self._ended
            )
            return
        if not inspect.iscoroutinefunction(job.func):
            held.begin()  # not a run: no claim to wait for
        self._host.submit(held, lambda: self._perform(job), self._ended)

    def _register(self, held: HeldJob) -> None:
        """Record the job's start in RQ as its own worker does (``prepare_execution``, then
        ``prepare_job_execution``: the job's execution in the started registry, the worker
        busy, both heartbeats, the job started), in one round trip to Redis where RQ makes
        two: this thread shares the interpreter with the runs in flight."""
        job = held.payload[0]
        try:
            with self.connection.pipeline() as pipe:
                ttl = self.get_heartbeat_ttl(job)
                execution = Execution.create(job, ttl, pipeline=pipe, worker_name=self.name)
                self.set_state(WorkerStatus.BUSY, pipeline=pipe)
                self.heartbeat(ttl, pipeline=pipe)
                job.heartbeat(now(), ttl, pipeline=pipe)
                job.prepare_for_execution(self.name, pipeline=pipe)
                pipe.persist(job.key)
                if len(self.queues) == 1:
                    pipe.lrem(held.payload[1].intermediate_queue_key, 1, job.id)
                pipe.execute()
            self.executions[execution.id] = execution
            held.payload[2] = execution
        except Exception:  # RQ's bookkeeping of one job must not stop the job or the others
            logger.exception("job %s: its start was not recorded in RQ", job.id)

    async def _perform(self, job: Job) -> Any:
        """The job's work: a coroutine function (a run) on the loop, anything else on a
        database thread."""
        function = job.func
        if inspect.iscoroutinefunction(function):
            return await function(*job.args, **job.kwargs)
        return await asyncio.get_running_loop().run_in_executor(None, job.perform)

    def _ended(self, held: HeldJob, task: "asyncio.Future[Any]") -> None:
        """On the loop: the job's task has ended; tell RQ on the finishing thread."""
        outcome: tuple[Any, BaseException | None]
        if task.cancelled():
            outcome = (None, _cancelled(held))
        else:
            error = task.exception()
            outcome = (None if error else task.result(), error)
        self._finisher.submit(self._finish, held, *outcome)

    def _finish(self, held: HeldJob, result: Any, error: BaseException | None) -> None:
        job, queue, execution = held.payload
        try:
            if error is None:
                self._finalize_success(job, queue, execution, result)
            else:
                if held.ending == Ending.STOPPED:
                    self._stopped_job_id = job.id  # RQ marks it stopped, not failed
                exc_info = (type(error), error, error.__traceback__)
                self._finalize_failure(job, queue, execution, exc_info)
            self._idle_soon()
        except Exception:  # RQ's bookkeeping of one job must not stop the others'
            logger.exception("job %s: its ending was not recorded in RQ", job.id)

    def _idle_soon(self) -> None:
        """A job has ended: the worker is idle in RQ's registry once it has held no job for
        ``_IDLE_AFTER_SECONDS`` (a worker that takes its next job at once, as under load,
        stays busy without a write to Redis between its jobs)."""
        loop = self._host.loop
        with contextlib.suppress(RuntimeError):  # the worker is stopping: its loop is closed
            loop.call_soon_threadsafe(loop.call_later, _IDLE_AFTER_SECONDS, self._idle_later)

    def _idle_later(self) -> None:
        with contextlib.suppress(RuntimeError):  # the worker is stopping
            self._finisher.submit(self._idle_write)

    def _idle_write(self) -> None:
        """On the finishing thread, where jobs are registered busy: ``idle``, unless a job
        is held (a suspended worker stays suspended)."""
        if self.get_state() != WorkerStatus.BUSY or self._host.count():
            return
        try:
            self.set_state(WorkerStatus.IDLE)
        except RedisError:
            logger.warning("the worker's idle state was not recorded in RQ", exc_info=True)

    def check_for_suspension(self, burst: bool) -> None:
        """RQ's check for ``rq suspend`` (a round trip to Redis), made at most once a
        second: RQ's loop made it for every job it took, as the job's run starts. A
        suspension stops the worker taking jobs within a second (RQ's own wait while
        suspended asks once a second too)."""
        checked = time.monotonic()
        if checked - self._suspension_checked < _SUSPENSION_CHECK_SECONDS:
            return
        self._suspension_checked = checked
        super().check_for_suspension(burst)

    # -- heartbeats and commands -----------------------------------------------------

    def set_state(self, state: str, pipeline: Any = None) -> None:
        """The worker's state in RQ's registry: ``busy`` while it holds a job (set as each
        job starts, ``_register``), ``idle`` once it holds none (``_idle_soon``). RQ's loop
        sets ``idle`` before each wait for a job (a round trip to Redis, while the job it
        has just taken starts): written only when no job is held, since the worker is
        still busy with the ones it holds."""
        if state == WorkerStatus.IDLE and pipeline is None and self._host.count():
            return
        super().set_state(state, pipeline=pipeline)

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        """RQ's heartbeat of the worker in one round trip to Redis (RQ's own makes three
        when it is given no pipeline). RQ's loop beats three times for every job it takes
        (after the dequeue, after handing the job on, before the next wait), all while the
        run starts: a beat that comes within a second of the last one is skipped (each
        keeps the worker alive for ``worker_ttl`` + 60 s)."""
        if pipeline is not None:
            super().heartbeat(timeout, pipeline=pipeline)
            return
        beat = time.monotonic()
        if timeout is None and beat - self._last_beat < _HEARTBEAT_SKIP_SECONDS:
            return
        with self.connection.pipeline() as own:
            super().heartbeat(timeout, pipeline=own)
            own.execute()
        self._last_beat = beat

    def _beat(self, stopped: threading.Event) -> None:
        """Beat every held job's heartbeat in Redis (RQ's bookkeeping) and its run's in
        PostgreSQL (what the sweeper reads, one statement for all); a job whose run is no
        longer its own is stopped."""
        while not stopped.wait(self.job_monitoring_interval):
            held = self._host.held()
            for job in held:
                if job.payload[2] is None:
                    continue  # not registered with RQ yet
                try:
                    self.maintain_heartbeats(job.payload[0], job.payload[2])
                except Exception:  # a Redis hiccup: the next beat tries again
                    logger.warning("heartbeat of job %s failed", job.job_id, exc_info=True)
            claims = {job.claim: job for job in held if job.claim is not None}
            if not claims:
                continue
            try:
                ours = runs_heartbeat(claims=[(claim.run_pk, claim.token) for claim in claims])
            except DatabaseError:  # the next beat tries again
                logger.warning("heartbeat of %d runs failed", len(claims), exc_info=True)
                continue
            finally:
                db_connection.close()  # this thread's: back to the pool between beats
            for claim, job in claims.items():
                if claim.run_pk not in ours:
                    logger.warning(
                        "run %s is no longer job %s's: stopping it", claim.run_pk, job.job_id
                    )
                    self._host.stop(job.job_id)

    def handle_payload(self, message: Any) -> None:
        """RQ's commands; a stop names one of the jobs held (RQ's own handler looks only at
        one), whose task is cancelled."""
        payload = parse_payload(message)
        if payload.get("command") not in _STOP_COMMANDS:
            super().handle_payload(message)
            return
        job_id = payload.get("job_id") or ""
        if not self._host.stop(job_id):
            logger.info("job %s is not held here: stop command ignored", job_id)

    def kill_horse(self, *args: Any, **kwargs: Any) -> None:
        """No work-horse to kill: a stop reaches the job held (``handle_payload``)."""

    def _serve_metrics(self) -> ThreadingHTTPServer | None:
        port = settings.WORKER_METRICS_PORT
        if not port:
            return None
        try:
            return metrics.metrics_server_start(
                host=settings.WORKER_METRICS_HOST,
                port=port,
                token=settings.METRICS_TOKEN,
                allowed=metrics.metrics_networks(settings.METRICS_ALLOWED_IPS),
            )
        except OSError:  # say, the port is another worker's: runs matter more than figures
            logger.exception("worker %s serves no metrics on port %s", self.name, port)
            return None

    def _beat_worker(self, stopped: threading.Event) -> None:
        """Beat this worker's row in PostgreSQL until it stops (a failed beat is logged; the
        next one tries again). The first also clears the rows of workers long dead."""
        prune = True
        while True:
            try:
                worker_beat(
                    name=self.name,
                    hostname=self.hostname or "",
                    pid=os.getpid(),
                    queues=self.queue_names(),
                )
                if prune:
                    worker_beats_prune(older_than=_DEAD_WORKER_ROWS_KEPT)
                    prune = False
            except DatabaseError:
                logger.warning("the beat of worker %s failed", self.name, exc_info=True)
            finally:
                db_connection.close()  # this thread's: back to the pool between beats
            if stopped.wait(settings.WORKER_BEAT_SECONDS):
                return

    def _end_beats(self) -> None:
        try:
            worker_beat_end(name=self.name)
        except DatabaseError:  # it goes stale on its own
            logger.warning("the beat of worker %s was not ended", self.name, exc_info=True)

    def run_maintenance_tasks(self) -> None:
        super().run_maintenance_tasks()
        self._recover()

    def _recover(self) -> None:
        """The sweeps: lost runs, expired interrupts, due push deliveries, due automation
        jobs (docs/automations.md: each due time makes one run, whichever worker fires it).
        A sweep comes after a quiet spell: on a connection the pool has checked (the one kept
        may have died with a database restart); each that fails is the next sweep's, and the
        others still run."""
        close_old_connections()
        recovered = _sweep("lost runs", runs_recover)
        if recovered is not None and any(recovered):
            logger.info("recovered runs: %d failed, %d enqueued again", *recovered)
        expired = _sweep("expired interrupts", interrupts_expire)
        if expired:
            logger.info("interrupts expired: %d (their threads take new messages again)", expired)
        pushes = _sweep("due push deliveries", push_deliveries_enqueue_due)
        if pushes:
            logger.info("push deliveries due: %d enqueued", pushes)
        fired = _sweep("due automation jobs", automations_fire_due)
        if fired:
            logger.info("automation jobs fired: %d runs made", fired)


def _sweep(what: str, sweep: Callable[[], T]) -> T | None:
    """One sweep's result; ``None`` when it failed (logged, its connection given back)."""
    try:
        return sweep()
    except (DatabaseError, RedisError):
        logger.warning("the sweep for %s failed; the next one tries again", what, exc_info=True)
        close_old_connections()
        return None


def _cancelled(held: HeldJob) -> BaseException:
    """What a cancelled job failed with, as RQ records it."""
    if held.ending == Ending.TIMED_OUT:
        return JobTimeoutException(f"Task exceeded maximum timeout value ({held.timeout} seconds)")
    if held.ending == Ending.SHUTDOWN:
        return SystemExit("the worker stopped")
    return asyncio.CancelledError("stopped: its run was cancelled")
