"""Benchmark: whole runs through a running server and its workers, on the instant demo model.

Each of ``--concurrency`` clients posts a one-tool-call run (``/tool calendar_list``), reads
the thread's SSE stream to the terminal event, and repeats. Prints the median and p99 of
POST → ``RUN_STARTED`` and POST → terminal event, completed runs/s, and the peak RSS of the
worker processes (every process whose command line names ``rqworker``, found when the
benchmark starts and sampled every 100 ms: the sampler must not take the CPU it measures).
"""

import http.client
import json
import os
import statistics
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_runs.services.tokens import api_token_create
from config.benchmarks import cpu_reference_line, cpu_reference_ms

_TOOL_RUN = "/tool calendar_list"


class Command(BaseCommand):
    help = "Post one-tool-call runs concurrently and time them to their terminal event."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000")
        parser.add_argument("--runs", type=int, default=200)
        parser.add_argument("--concurrency", type=int, default=8)

    def handle(self, *args: Any, **options: Any) -> None:
        token = api_token_create(username="bench-pipeline")
        url = urlsplit(options["url"])
        started_ms: list[float] = []
        ended_ms: list[float] = []
        failures: list[str] = []
        lock = threading.Lock()
        remaining = [options["runs"]]

        def client() -> None:
            while True:
                with lock:
                    if remaining[0] == 0:
                        return
                    remaining[0] -= 1
                try:
                    to_start, to_end, terminal = _one_run(url.hostname or "", url.port or 80, token)
                except (OSError, ValueError) as exc:
                    with lock:
                        failures.append(repr(exc))
                    continue
                with lock:
                    started_ms.append(to_start)
                    ended_ms.append(to_end)
                    if terminal != "RUN_FINISHED":
                        failures.append(f"run ended with {terminal}")

        reference_before = cpu_reference_ms()
        sampler = _RssSampler()
        sampler.start()
        threads = [threading.Thread(target=client) for _ in range(options["concurrency"])]
        began = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        wall = time.perf_counter() - began
        sampler.stop()
        if not ended_ms:
            raise CommandError(f"no run completed: {failures[:1]}")
        self.stdout.write(
            f"runs: {len(ended_ms)} ({len(failures)} failed)  clients: {options['concurrency']}  "
            f"wall: {wall:.2f} s\n"
            f"completed runs/s: {len(ended_ms) / wall:.1f}\n"
            f"POST -> RUN_STARTED ms: median {statistics.median(started_ms):.1f}  "
            f"p99 {_percentile(started_ms, 99):.1f}\n"
            f"POST -> terminal ms: median {statistics.median(ended_ms):.1f}  "
            f"p99 {_percentile(ended_ms, 99):.1f}\n"
            f"worker peak RSS: {sampler.peak_mb:.0f} MB (largest single worker process)\n"
            f"{cpu_reference_line(reference_before)}"
        )


def _one_run(host: str, port: int, token: str) -> tuple[float, float, str]:
    """POST a run, then read its thread's stream to the end: (ms to RUN_STARTED, ms to the
    terminal event, the terminal event's type)."""
    thread_id = str(uuid.uuid4())
    body = json.dumps(
        {
            "threadId": thread_id,
            "runId": "bench",
            "messages": [{"id": "m1", "role": "user", "content": _TOOL_RUN}],
            "forwardedProps": {"runtime_mode": "chat"},
        }
    )
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    posted = time.perf_counter()
    connection = http.client.HTTPConnection(host, port, timeout=60)
    connection.request("POST", "/api/v1/agent/runs", body=body, headers=headers)
    response = connection.getresponse()
    response.read()
    if response.status != 202:
        raise ValueError(f"POST answered {response.status}")
    connection.request(
        "GET",
        f"/api/v1/agent/runs/{thread_id}/events",
        headers={"Authorization": f"Bearer {token}"},
    )
    stream = connection.getresponse()
    to_start = 0.0
    terminal = ""
    for line in stream:
        if line.startswith(b"event: RUN_STARTED"):
            to_start = (time.perf_counter() - posted) * 1000
        elif line.startswith((b"event: RUN_FINISHED", b"event: RUN_ERROR")):
            terminal = line.decode().split(": ", 1)[1].strip()
            break
    to_end = (time.perf_counter() - posted) * 1000
    connection.close()
    return to_start, to_end, terminal


class _RssSampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.peak_mb = 0.0
        self._stopped = threading.Event()
        self._workers = _worker_pids()

    def run(self) -> None:
        while not self._stopped.wait(0.1):
            for pid in self._workers:
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmRSS:"):
                        self.peak_mb = max(self.peak_mb, int(line.split()[1]) / 1024)

    def stop(self) -> None:
        self._stopped.set()
        self.join()


def _worker_pids() -> list[int]:
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if b"rqworker" in (entry / "cmdline").read_bytes():
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def _percentile(values: list[float], percent: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(percent / 100 * (len(ordered) - 1)))]
