"""The RQ worker for runs: it runs each job in its own process, without forking.

A fork per job (RQ's default) is costly (docs/benchmarks.md, "Whole runs"): the fork, the
work-horse's bookkeeping, a new database connection, and caches that died with each horse.
This worker keeps its connections and caches from one job to the next, and answers one prompt
with the demo model when it starts, so the first run does not pay AgentScope's lazy set-up.

What the work-horse gave, it gives in-process:
- **cancel**: RQ's stop-job command reaches ``kill_horse``, which asks the running job to stop
  (agent_runs/runtime/job_stop.py); the model call in flight is cancelled at once.
- **job timeout**: RQ's death penalty (SIGALRM) works the same in the worker's main thread.
- **liveness**: a thread beats the job's heartbeat while it runs (a forking worker's parent
  did that), in Redis for RQ and in PostgreSQL for the sweeper (``runs_recover``), which
  fails only runs whose worker died, whatever Redis has lost.

And a thread beats the worker's own heartbeat in PostgreSQL (``WorkerBeat``, what
``/readyz`` counts), every ``WORKER_BEAT_SECONDS`` from start to a clean stop, whether it runs
a job or waits for one; with ``WORKER_METRICS_PORT`` set, a thread serves its metrics.
"""

import datetime
import gc
import logging
import os
import threading
import time
from http.server import ThreadingHTTPServer
from typing import Any

from django.conf import settings
from django.db import DatabaseError, close_old_connections, connections
from django.db import connection as db_connection
from redis.exceptions import RedisError
from rq import SimpleWorker
from rq.job import Job
from rq.queue import Queue

import agent_runs.runtime.jobs  # noqa: F401 - preloaded on purpose, see the module docstring
from agent_runs import metrics
from agent_runs.events.emitter import bookkeeping, close_event_connection
from agent_runs.runtime import agentscope_tuning
from agent_runs.runtime.agents import WORKER_SYSTEM_PROMPT, conversation, worker_reply
from agent_runs.runtime.async_bridge import drain, run_coroutine
from agent_runs.runtime.chat_models import chat_model_for
from agent_runs.runtime.demo_model import DEMO_MODEL_ID
from agent_runs.runtime.execution import claim_holder
from agent_runs.runtime.job_stop import job_stop
from agent_runs.services.lifecycle import run_heartbeat, runs_recover
from agent_runs.services.push import push_deliveries_enqueue_due
from agent_runs.services.workers import worker_beat, worker_beat_end, worker_beats_prune

logger = logging.getLogger(__name__)

_RECHECK_AFTER_IDLE_SECONDS = 5.0
# The rows of workers that died without a clean stop are deleted after this long.
_DEAD_WORKER_ROWS_KEPT = datetime.timedelta(days=1)


class RunWorker(SimpleWorker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        sweep = settings.AGENT_RUN_SWEEP_SECONDS
        kwargs["maintenance_interval"] = sweep
        # RQ waits for jobs for (worker_ttl - 15) s before its loop comes round to the
        # maintenance tasks: make that the sweep interval.
        kwargs["worker_ttl"] = min(kwargs.get("worker_ttl") or sweep + 15, sweep + 15)
        kwargs.setdefault("job_monitoring_interval", settings.AGENT_RUN_HEARTBEAT_SECONDS)
        super().__init__(*args, **kwargs)
        agentscope_tuning.apply()
        self._last_job_ended = 0.0

    def work(self, *args: Any, **kwargs: Any) -> bool:
        # A demo reply loads and exercises the code every run uses before the first job.
        model = chat_model_for(DEMO_MODEL_ID)
        reply = worker_reply(
            model=model,
            messages=conversation((), "warm-up"),
            tools=(),
            system_prompt=WORKER_SYSTEM_PROMPT,
            max_iters=1,
        )
        run_coroutine(drain(reply))
        self._recover()
        # What is loaded by now lives as long as the process: keep it out of every later
        # garbage collection's walk.
        gc.collect()
        gc.freeze()
        exporter = self._serve_metrics()
        stopped = threading.Event()
        heart = threading.Thread(
            target=self._beat_worker, args=(stopped,), name="worker-beat", daemon=True
        )
        heart.start()
        try:
            return bool(super().work(*args, **kwargs))
        finally:
            stopped.set()
            heart.join(timeout=5)
            self._end_beats()
            if exporter is not None:
                exporter.shutdown()
                exporter.server_close()
            job_stop.reset()  # a stop asked of the last job must not stop the clean-up
            run_coroutine(close_event_connection())
            bookkeeping().close_connection()

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

    def execute_job(self, job: Job, queue: Queue) -> None:
        job_stop.reset(job_id=job.id)
        if time.monotonic() - self._last_job_ended > _RECHECK_AFTER_IDLE_SECONDS:
            # After a quiet spell, a connection the database may have closed (a restart, an
            # idle timeout) is given back, and the pool hands out a checked one. Jobs that
            # follow each other keep theirs: the check costs a round trip.
            close_old_connections()
        beating = threading.Event()
        heart = threading.Thread(
            target=self._beat, args=(job, beating), name="rq-job-heartbeat", daemon=True
        )
        heart.start()
        try:
            super().execute_job(job, queue)
        finally:
            beating.set()
            heart.join(timeout=5)
            self._last_job_ended = time.monotonic()
            if any(connection.errors_occurred for connection in connections.all()):
                close_old_connections()  # gives back a connection that failed

    def _beat(self, job: Job, stopped: threading.Event) -> None:
        """Beat the job's heartbeat in Redis (RQ's bookkeeping) and its run's in PostgreSQL
        (what the sweeper reads); a job whose run is no longer its own is stopped."""
        execution = None
        while not stopped.wait(self.job_monitoring_interval):
            try:
                execution = execution or self.execution
                if execution is not None:
                    self.maintain_heartbeats(job, execution)
            except Exception:  # a Redis hiccup: the next beat tries again
                logger.warning("heartbeat of job %s failed", job.id, exc_info=True)
            claim = claim_holder.current
            if claim is None:
                continue
            try:
                if not run_heartbeat(run_pk=claim.run_pk, claim_token=claim.token):
                    logger.warning("run %s is no longer this job's: stopping it", claim.run_pk)
                    job_stop.request(job_id=job.id)
            except DatabaseError:  # the next beat tries again
                logger.warning("heartbeat of run %s failed", claim.run_pk, exc_info=True)
            finally:
                db_connection.close()  # this thread's: back to the pool between beats

    def kill_horse(self, *args: Any, **kwargs: Any) -> None:
        """RQ's stop-job command (cancel): stop the job it names, if it still runs here.
        (Without a name, the job it named has ended already: nothing to stop.)"""
        if self._stopped_job_id is not None:
            job_stop.request(job_id=self._stopped_job_id)

    def run_maintenance_tasks(self) -> None:
        super().run_maintenance_tasks()
        self._recover()

    def _recover(self) -> None:
        # A sweep comes after a quiet spell: on a connection the pool has checked (the one
        # kept may have died with a database restart), and a failure is the next sweep's.
        close_old_connections()
        try:
            failed, enqueued = runs_recover()
        except (DatabaseError, RedisError):
            logger.warning(
                "the sweep for lost runs failed; the next one tries again", exc_info=True
            )
            close_old_connections()
            return
        if failed or enqueued:
            logger.info("recovered runs: %d failed, %d enqueued again", failed, enqueued)
        try:
            pushes = push_deliveries_enqueue_due()
        except DatabaseError:
            logger.warning("the sweep for due push deliveries failed", exc_info=True)
            close_old_connections()
            return
        if pushes:
            logger.info("push deliveries due: %d enqueued", pushes)
