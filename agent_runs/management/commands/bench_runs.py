"""Benchmark: post N runs from C concurrent clients against a running server.

Prints accepted runs/s, p50/p99 latency of the 202, and the median time from enqueue (the
RQ job's ``enqueued_at``) to the job starting (the run's ``started_at``). Needs the server
and a worker running on the same database and Redis as this command.
"""

import http.client
import json
import statistics
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import django_rq
from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from rq.job import Job

from agent_runs.benchmarks import cpu_reference_line, cpu_reference_ms
from agent_runs.models import Run
from agent_runs.services.tokens import api_token_create


class Command(BaseCommand):
    help = "Post runs concurrently to a running server and print latency and throughput."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000")
        parser.add_argument("--runs", type=int, default=400)
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument("--username", default="bench")
        parser.add_argument("--wait", type=float, default=300, help="seconds to wait for runs")
        parser.add_argument(
            "--no-jobs",
            action="store_true",
            help="only measure the API (for a server whose worker is stopped)",
        )
        parser.add_argument(
            "--idle-runs",
            type=int,
            default=30,
            help="runs posted one at a time after the burst, each once the worker is idle",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        token = api_token_create(username=options["username"])
        url = urlsplit(options["url"])
        reference_before = cpu_reference_ms()
        burst = _post_burst(url, token, options["runs"], options["concurrency"])
        if burst.failures:
            raise CommandError(f"{len(burst.failures)} requests failed, first: {burst.failures[0]}")

        ms = sorted(value * 1000 for value in burst.latencies)
        wall = burst.wall
        self.stdout.write(
            f"runs: {len(ms)}  clients: {options['concurrency']}  wall: {wall:.2f} s\n"
            f"accepted runs/s: {len(ms) / wall:.1f}\n"
            f"202 latency ms: p50 {_percentile(ms, 50):.1f}  p99 {_percentile(ms, 99):.1f}  "
            f"max {ms[-1]:.1f}\n"
            f"{cpu_reference_line(reference_before)}"
        )
        if options["no_jobs"]:
            return
        starts = self._enqueue_to_start(burst.task_ids, options["wait"])
        idle_starts = self._idle_enqueue_to_start(url, token, options["idle_runs"])
        self.stdout.write(
            f"enqueue -> job start ms, during the burst (includes queueing behind other "
            f"runs): median {statistics.median(starts):.1f}  (over {len(starts)} runs)\n"
            f"enqueue -> job start ms, idle worker: median {statistics.median(idle_starts):.1f}  "
            f"max {max(idle_starts):.1f}  (over {len(idle_starts)} runs)"
        )

    def _idle_enqueue_to_start(self, url: Any, token: str, count: int) -> list[float]:
        connection = http.client.HTTPConnection(url.hostname or "", url.port or 80)
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        delays = []
        for _ in range(count):
            connection.request(
                "POST", "/api/v1/agent/runs", body=json.dumps(_run_input()), headers=headers
            )
            response = connection.getresponse()
            task_id = json.loads(response.read())["taskId"]
            delays.extend(self._enqueue_to_start([task_id], wait=30))
            # Let the work-horse finish and the worker go back to waiting on the queue.
            while not Run.objects.filter(task_id=task_id, finished_at__isnull=False).exists():
                time.sleep(0.01)
            time.sleep(0.05)
        connection.close()
        return delays

    def _enqueue_to_start(self, task_ids: list[str], wait: float) -> list[float]:
        deadline = time.monotonic() + wait
        uuids = [uuid.UUID(task_id) for task_id in task_ids]
        while Run.objects.filter(task_id__in=uuids, started_at__isnull=True).exists():
            if time.monotonic() > deadline:
                raise CommandError("runs did not start in time: is a worker running?")
            time.sleep(0.01)
        started_at = dict(
            Run.objects.filter(task_id__in=uuids).values_list("task_id", "started_at")
        )
        connection = django_rq.get_queue(settings.AGENT_RUNS_QUEUE).connection
        jobs = Job.fetch_many(task_ids, connection=connection)
        delays = []
        for job in jobs:
            job_started = started_at[uuid.UUID(job.id)] if job else None
            if job is not None and job.enqueued_at is not None and job_started is not None:
                delays.append((job_started - job.enqueued_at).total_seconds() * 1000)
        return delays


@dataclass
class _Burst:
    """The burst's accepted runs (202 latency in seconds, task id), refusals and wall time."""

    latencies: list[float] = field(default_factory=list)
    task_ids: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    wall: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _post_burst(url: Any, token: str, runs: int, concurrency: int) -> _Burst:
    """Post ``runs`` runs from ``concurrency`` clients, each on its own connection."""
    burst = _Burst()
    share, extra = divmod(runs, concurrency)
    threads = [
        threading.Thread(target=_post_runs, args=(burst, url, token, share + (index < extra)))
        for index in range(concurrency)
    ]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    burst.wall = time.perf_counter() - started
    return burst


def _post_runs(burst: _Burst, url: Any, token: str, count: int) -> None:
    """One client: ``count`` runs posted one after the other on one connection."""
    connection = http.client.HTTPConnection(url.hostname or "", url.port or 80)
    for _ in range(count):
        body = json.dumps(_run_input()).encode()
        headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
        started = time.perf_counter()
        connection.request("POST", "/api/v1/agent/runs", body=body, headers=headers)
        response = connection.getresponse()
        payload = response.read()
        elapsed = time.perf_counter() - started
        with burst.lock:
            if response.status == 202:
                burst.latencies.append(elapsed)
                burst.task_ids.append(json.loads(payload)["taskId"])
            else:
                burst.failures.append(f"{response.status} {payload[:200]!r}")
    connection.close()


def _run_input() -> dict[str, Any]:
    return {
        "threadId": str(uuid.uuid4()),
        "runId": f"bench-{uuid.uuid4().hex[:16]}",
        "messages": [{"id": "m1", "role": "user", "content": "Benchmark message"}],
        "forwardedProps": {"runtime_mode": "chat"},
    }


def _percentile(sorted_values: list[float], percent: float) -> float:
    index = min(len(sorted_values) - 1, round(percent / 100 * (len(sorted_values) - 1)))
    return sorted_values[index]
