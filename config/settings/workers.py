"""The runs' queue and the workers that run them: timeouts, beats, automation sweeps,
concurrency."""

from django.core.exceptions import ImproperlyConfigured

from config.env import env_int
from config.settings.stores import REDIS_URL

AGENT_RUNS_QUEUE = "runs"
AGENT_RUN_JOB_TIMEOUT = env_int("AGENT_RUN_JOB_TIMEOUT", 600, minimum=1)
# A running run whose job has not beaten for this long belongs to a dead worker;
# workers look for such runs this often.
AGENT_RUN_STALE_SECONDS = env_int("AGENT_RUN_STALE_SECONDS", 120, minimum=1)
AGENT_RUN_SWEEP_SECONDS = env_int("AGENT_RUN_SWEEP_SECONDS", 30, minimum=5)
# How often a worker renews the heartbeat of the job it runs.
AGENT_RUN_HEARTBEAT_SECONDS = env_int("AGENT_RUN_HEARTBEAT_SECONDS", 10, minimum=1)
if AGENT_RUN_HEARTBEAT_SECONDS >= AGENT_RUN_STALE_SECONDS:
    raise ImproperlyConfigured(
        "AGENT_RUN_HEARTBEAT_SECONDS must be shorter than AGENT_RUN_STALE_SECONDS, or every "
        "long run would look dead"
    )
# Automation jobs (docs/automations.md): a due time the workers' sweep reaches later than
# this is missed, and makes a run only for a job whose catch-up is ``once``.
AUTOMATION_MISSED_AFTER_SECONDS = env_int("AUTOMATION_MISSED_AFTER_SECONDS", 300, minimum=60)
RQ_QUEUES = {
    AGENT_RUNS_QUEUE: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": AGENT_RUN_JOB_TIMEOUT},
}
# The worker runs jobs in its own process, warm (see agent_runs/runtime/worker.py).
RQ = {"WORKER_CLASS": "agent_runs.runtime.worker.RunWorker"}
# How many jobs (runs) one worker process holds at once, as tasks on its event loop, and
# how many threads do their database work (each keeps one connection from the pool: with
# the beats and the sweep, a worker holds at most WORKER_DB_THREADS + 4 connections,
# whatever its runs; DATABASE_POOL_MAX_SIZE must allow that).
WORKER_CONCURRENCY = env_int("WORKER_CONCURRENCY", 32, minimum=1)
WORKER_DB_THREADS = env_int("WORKER_DB_THREADS", 4, minimum=1)
