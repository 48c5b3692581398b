"""Benchmark: whole runs through a running server and its workers.

Each of ``--concurrency`` clients posts a run, reads the thread's SSE stream to the terminal
event, and repeats. By default a run is one tool call on the instant demo model
(``/tool calendar_list``). With ``--tokens N`` it is a run whose answer is N tokens, for a
worker whose models are on ``bench_provider`` (the provider mode: one chunk per token through
the real provider path); then POST → first token is timed too, ``--big-tokens M`` adds one
M-token run timed for its token events/s, and the CPU each server process spent per run is
printed. Prints the median and p99 of POST → ``RUN_STARTED`` and POST → terminal event,
completed runs/s, and the peak RSS of the server processes (every process whose command line
names ``rqworker`` or ``daphne``, found when the benchmark starts and sampled every 100 ms:
the sampler must not take the CPU it measures).
"""

import http.client
import json
import os
import statistics
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_runs.benchmarks import cpu_reference_line, cpu_reference_ms
from agent_runs.services.tokens import api_token_create

_TOOL_RUN = "/tool calendar_list"


class Command(BaseCommand):
    help = "Post one-tool-call runs concurrently and time them to their terminal event."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--url", default="http://127.0.0.1:8000")
        parser.add_argument("--runs", type=int, default=200)
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument(
            "--tokens", type=int, default=0, help="runs answering N tokens (bench_provider)"
        )
        parser.add_argument(
            "--big-tokens", type=int, default=0, help="then one run of M tokens: token events/s"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        token = api_token_create(username="bench-pipeline")
        url = urlsplit(options["url"])
        host, port = url.hostname or "", url.port or 80
        content = f"tokens={options['tokens']}" if options["tokens"] else _TOOL_RUN
        results = _Results(remaining=options["runs"])
        reference_before = cpu_reference_ms()
        sampler = _RssSampler()
        cpu_before = {pid: _cpu_ms(pid) for pid in sampler.pids}
        sampler.start()
        wall = _run_clients(results, options["concurrency"], host, port, token, content)
        cpu_used = {pid: _cpu_ms(pid) - before for pid, before in cpu_before.items()}
        big = None
        if options["big_tokens"]:
            big = _one_run(host, port, token, f"tokens={options['big_tokens']}")
        sampler.stop()
        if not results.ended_ms:
            raise CommandError(f"no run completed: {results.failures[:1]}")
        self._report_runs(results, wall, options["concurrency"])
        self._report_processes(sampler, cpu_used, len(results.ended_ms))
        if big is not None:
            self._report_big_run(big, options["big_tokens"])
        self.stdout.write(
            f"worker peak RSS: {sampler.peak_mb:.0f} MB (largest single worker process)\n"
            f"{cpu_reference_line(reference_before)}"
        )

    def _report_runs(self, results: "_Results", wall: float, concurrency: int) -> None:
        started_ms, ended_ms = results.started_ms, results.ended_ms
        self.stdout.write(
            f"runs: {len(ended_ms)} ({len(results.failures)} failed)  clients: {concurrency}  "
            f"wall: {wall:.2f} s\n"
            f"completed runs/s: {len(ended_ms) / wall:.1f}\n"
            f"POST -> RUN_STARTED ms: median {statistics.median(started_ms):.1f}  "
            f"p99 {_percentile(started_ms, 99):.1f}\n"
            f"POST -> terminal ms: median {statistics.median(ended_ms):.1f}  "
            f"p99 {_percentile(ended_ms, 99):.1f}\n"
        )
        if results.first_token_ms:
            self.stdout.write(
                f"POST -> first token ms: median {statistics.median(results.first_token_ms):.1f}"
                f"  p99 {_percentile(results.first_token_ms, 99):.1f}"
            )

    def _report_processes(
        self, sampler: "_RssSampler", cpu_used: dict[int, float], runs: int
    ) -> None:
        for pid, used in sorted(cpu_used.items()):
            self.stdout.write(
                f"CPU {sampler.names[pid]} (pid {pid}): {used / runs:.1f} ms/run, "
                f"peak RSS {sampler.peak_mb_of[pid]:.0f} MB"
            )
        self.stdout.write(f"server CPU per run: {sum(cpu_used.values()) / runs:.1f} ms")

    def _report_big_run(self, big: "_Timed", tokens: int) -> None:
        span = (big.last_token_at or 0) - (big.first_token_at or 0)
        rate = (big.token_events - 1) / span if span > 0 else float("nan")
        self.stdout.write(
            f"one {tokens}-token run: {big.token_events} token events, "
            f"{rate:.0f} token events/s (first to last), {big.to_end:.0f} ms to its end"
        )


@dataclass
class _Results:
    """What the clients saw, shared between their threads (under ``lock``)."""

    remaining: int
    started_ms: list[float] = field(default_factory=list)
    first_token_ms: list[float] = field(default_factory=list)
    ended_ms: list[float] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def take_one(self) -> bool:
        """Whether a run is left to post (and it is now this client's)."""
        with self.lock:
            if self.remaining == 0:
                return False
            self.remaining -= 1
            return True

    def add(self, timed: "_Timed") -> None:
        with self.lock:
            self.started_ms.append(timed.to_start)
            self.ended_ms.append(timed.to_end)
            if timed.to_first_token is not None:
                self.first_token_ms.append(timed.to_first_token)
            if timed.terminal != "RUN_FINISHED":
                self.failures.append(f"run ended with {timed.terminal}")

    def fail(self, error: Exception) -> None:
        with self.lock:
            self.failures.append(repr(error))


def _run_clients(
    results: _Results, concurrency: int, host: str, port: int, token: str, content: str
) -> float:
    """Post the runs from ``concurrency`` client threads until none is left; the wall time."""

    def client() -> None:
        while results.take_one():
            try:
                timed = _one_run(host, port, token, content)
            except (OSError, ValueError) as exc:
                results.fail(exc)
                continue
            results.add(timed)

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    began = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return time.perf_counter() - began


@dataclass
class _Timed:
    """One run as its client saw it (ms from the POST; token times from the clock)."""

    to_start: float = 0.0
    to_first_token: float | None = None
    to_end: float = 0.0
    terminal: str = ""
    token_events: int = 0
    first_token_at: float | None = None
    last_token_at: float | None = None


def _one_run(host: str, port: int, token: str, content: str) -> _Timed:
    """POST a run, then read its thread's stream to the end."""
    thread_id = str(uuid.uuid4())
    body = json.dumps(
        {
            "threadId": thread_id,
            "runId": "bench",
            "messages": [{"id": "m1", "role": "user", "content": content}],
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
    timed = _stream_timed(connection.getresponse(), posted)
    connection.close()
    return timed


def _stream_timed(stream: Iterable[bytes], posted: float) -> _Timed:
    """The run's stream read to its terminal event, its moments timed from ``posted``."""
    timed = _Timed()
    for line in stream:
        if line.startswith(b"event: TEXT_MESSAGE_CONTENT"):
            now = time.perf_counter()
            timed.token_events += 1
            timed.last_token_at = now
            if timed.first_token_at is None:
                timed.first_token_at = now
                timed.to_first_token = (now - posted) * 1000
        elif line.startswith(b"event: RUN_STARTED"):
            timed.to_start = (time.perf_counter() - posted) * 1000
        elif line.startswith((b"event: RUN_FINISHED", b"event: RUN_ERROR")):
            timed.terminal = line.decode().split(": ", 1)[1].strip()
            break
    timed.to_end = (time.perf_counter() - posted) * 1000
    return timed


class _RssSampler(threading.Thread):
    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.names = _server_processes()
        self.pids = list(self.names)
        self.peak_mb_of = dict.fromkeys(self.pids, 0.0)
        self._stopped = threading.Event()

    @property
    def peak_mb(self) -> float:
        workers = [mb for pid, mb in self.peak_mb_of.items() if self.names[pid] == "rqworker"]
        return max(workers, default=0.0)

    def run(self) -> None:
        while not self._stopped.wait(0.1):
            for pid in self.pids:
                try:
                    status = Path(f"/proc/{pid}/status").read_text()
                except OSError:
                    continue
                for line in status.splitlines():
                    if line.startswith("VmRSS:"):
                        rss = int(line.split()[1]) / 1024
                        self.peak_mb_of[pid] = max(self.peak_mb_of[pid], rss)

    def stop(self) -> None:
        self._stopped.set()
        self.join()


def _server_processes() -> dict[int, str]:
    """The server's processes on this machine: pid → ``rqworker`` or ``daphne``."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            command = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        for name in ("rqworker", "daphne"):
            if name.encode() in command:
                found[int(entry.name)] = name
    return found


def _cpu_ms(pid: int) -> float:
    """The CPU time (user + system) a process has used so far, in ms."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _percentile(values: list[float], percent: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(percent / 100 * (len(ordered) - 1)))]
