"""Benchmark: AG-UI events through the real path, codec → PostgreSQL + Redis → daphne SSE →
an HTTP client.

It starts its own daphne on a free port (same database and Redis as this command), emits
synthetic runs with the real emitter, reads them over HTTP, and prints:
- events/s delivered for one run of ``--events`` events,
- emit → client latency p50/p99 at ``--rate`` events/s,
- the time to resume ``--resume-events`` events from PostgreSQL,
- the daphne process's extra memory holding ``--idle`` idle SSE connections, and whether
  every one of them received keep-alives.
"""

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ag_ui.core import (
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)
from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandParser

from agent_runs.events.emitter import RunEventEmitter
from agent_runs.models import Run, Thread
from agent_runs.services.tokens import api_token_create

_KEEPALIVE_SECONDS = 2.0


class Command(BaseCommand):
    help = "Measure event delivery, latency, resume time and idle-connection memory of SSE."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--events", type=int, default=20_000)
        parser.add_argument("--rate", type=float, default=100.0)
        parser.add_argument("--rate-events", type=int, default=500)
        parser.add_argument("--resume-events", type=int, default=10_000)
        parser.add_argument("--idle", type=int, default=1000)
        parser.add_argument(
            "--only", choices=["throughput", "latency", "resume", "idle"], help="run one part"
        )

    def handle(self, *args: Any, **options: Any) -> None:
        token = api_token_create(username="bench-events")
        self.user_id = get_user_model().objects.get(username="bench-events").pk
        server, port = _start_daphne()
        parts = {
            "throughput": lambda: self._throughput(port, token, options["events"]),
            "latency": lambda: self._latency(port, token, options["rate"], options["rate_events"]),
            "resume": lambda: self._resume(port, token, options["resume_events"]),
            "idle": lambda: self._idle(server.pid, port, token, options["idle"]),
        }
        try:
            for name, part in parts.items():
                if options["only"] in (None, name):
                    part()
        finally:
            server.terminate()
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()

    def _new_run(self) -> Run:
        thread = Thread.objects.create(owner_id=self.user_id)
        return Run.objects.create(
            thread=thread,
            run_id=f"bench-{uuid.uuid4().hex[:12]}",
            runtime_mode=Run.RuntimeMode.CHAT,
            status=Run.Status.RUNNING,  # synthetic: no job will ever claim it
            input={},
            input_sha256="",
        )

    def _emit_run(self, run: Run, deltas: int, pace: Callable[[int], None] | None = None) -> None:
        ids = {"threadId": str(run.thread_id), "runId": run.run_id}
        emitter = RunEventEmitter(run=run)
        emitter.emit(RunStartedEvent(thread_id=str(run.thread_id), run_id=run.run_id))
        emitter.emit(StepStartedEvent(step_name="worker", **ids))
        emitter.emit(TextMessageStartEvent(message_id="m", role="assistant", **ids))
        for index in range(deltas):
            if pace:
                pace(index)
            emitter.emit(
                TextMessageContentEvent(message_id="m", delta="x", emittedAt=time.time(), **ids)
            )
        emitter.emit(TextMessageEndEvent(message_id="m", **ids))
        emitter.emit(StepFinishedEvent(step_name="worker", **ids))
        emitter.emit(RunFinishedEvent(thread_id=str(run.thread_id), run_id=run.run_id))

    def _throughput(self, port: int, token: str, events: int) -> None:
        run = self._new_run()
        reader = _Reader(port, token, str(run.thread_id))
        reader.start()
        started = time.perf_counter()
        self._emit_run(run, events - 6)
        emitted = time.perf_counter() - started
        reader.join()
        delivered = reader.received_at[-1] - started
        self.stdout.write(
            f"throughput: {len(reader.received_at)} events of one run; emitted in "
            f"{emitted:.2f} s ({events / emitted:.0f}/s); delivered to the client in "
            f"{delivered:.2f} s ({len(reader.received_at) / delivered:.0f} events/s)"
        )

    def _latency(self, port: int, token: str, rate: float, count: int) -> None:
        run = self._new_run()
        reader = _Reader(port, token, str(run.thread_id))
        reader.start()
        time.sleep(0.5)
        origin = time.perf_counter()

        def pace(index: int) -> None:
            delay = origin + index / rate - time.perf_counter()
            if delay > 0:
                time.sleep(delay)

        self._emit_run(run, count, pace)
        reader.join()
        latencies = sorted(ms for ms in reader.latencies_ms)
        self.stdout.write(
            f"latency at {rate:.0f} events/s ({len(latencies)} events): emit -> client p50 "
            f"{_percentile(latencies, 50):.2f} ms, p99 {_percentile(latencies, 99):.2f} ms"
        )

    def _resume(self, port: int, token: str, count: int) -> None:
        run = self._new_run()
        self._emit_run(run, count - 6)
        started = time.perf_counter()
        reader = _Reader(port, token, str(run.thread_id), last_event_id="0")
        reader.start()
        reader.join()
        elapsed = time.perf_counter() - started
        self.stdout.write(
            f"resume: {len(reader.received_at)} events from PostgreSQL in {elapsed:.3f} s"
        )

    def _idle(self, pid: int, port: int, token: str, count: int) -> None:
        run = self._new_run()
        self._emit_run(run, 1)
        before = _rss_mb(pid)
        keep_alives, open_seconds, during = asyncio.run(
            _hold_idle(port, token, str(run.thread_id), count, lambda: _rss_mb(pid))
        )
        answered = sum(1 for seen in keep_alives if seen >= 0)
        flowing = sum(1 for seen in keep_alives if seen >= 2)
        self.stdout.write(
            f"idle: {answered}/{count} SSE connections open (opened in {open_seconds:.1f} s); "
            f"{flowing} received >= 2 keep-alives in {3 * _KEEPALIVE_SECONDS:.0f} s; "
            f"daphne memory {before:.0f} MB -> {during:.0f} MB (+{during - before:.0f} MB)"
        )


class _Reader:
    """Reads one thread's stream to its end in a thread of its own (blocking HTTP)."""

    def __init__(self, port: int, token: str, thread_id: str, last_event_id: str = "") -> None:
        import threading

        self.port, self.token, self.thread_id = port, token, thread_id
        self.last_event_id = last_event_id
        self.received_at: list[float] = []
        self.latencies_ms: list[float] = []
        self._thread = threading.Thread(target=self._read)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join(timeout=300)

    def _read(self) -> None:
        import http.client

        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        headers = {"Authorization": f"Bearer {self.token}"}
        if self.last_event_id:
            headers["Last-Event-ID"] = self.last_event_id
        connection.request("GET", f"/api/v1/agent/runs/{self.thread_id}/events", headers=headers)
        response = connection.getresponse()
        for line in response:
            if not line.startswith(b"data: "):
                continue
            now = time.perf_counter()
            self.received_at.append(now)
            emitted_at = json.loads(line[6:]).get("emittedAt")
            if emitted_at is not None:
                self.latencies_ms.append((time.time() - emitted_at) * 1000)
        connection.close()


@dataclass
class _IdleStreams:
    """The followed streams ``_hold_idle`` holds open, shared by their tasks."""

    keep_alives: list[int]  # per stream; -1: never answered 200
    pending: int  # streams not answered yet
    opened: asyncio.Event = field(default_factory=asyncio.Event)
    window_over: asyncio.Event = field(default_factory=asyncio.Event)


async def _hold_idle(
    port: int, token: str, thread_id: str, count: int, measure: Callable[[], float]
) -> tuple[list[int], float, float]:
    """Open ``count`` followed streams; once all are open, hold them for three keep-alive
    intervals, counting keep-alives on each, and measure memory while they are all open.
    Returns the keep-alive counts (-1: never answered 200), the seconds it took to open
    them all, and the measurement."""
    streams = _IdleStreams(keep_alives=[-1] * count, pending=count)
    request = (
        f"GET /api/v1/agent/runs/{thread_id}/events?follow=true HTTP/1.1\r\n"
        f"Host: 127.0.0.1\r\nAuthorization: Bearer {token}\r\n\r\n".encode()
    )
    started = time.monotonic()
    holders = [
        asyncio.create_task(_hold_one(streams, index, port, request)) for index in range(count)
    ]
    await streams.opened.wait()
    open_seconds = time.monotonic() - started
    await asyncio.sleep(3 * _KEEPALIVE_SECONDS + 0.5)
    measured = measure()
    streams.window_over.set()
    for holder in holders:
        holder.cancel()
    await asyncio.gather(*holders, return_exceptions=True)
    return streams.keep_alives, open_seconds, measured


async def _hold_one(streams: _IdleStreams, index: int, port: int, request: bytes) -> None:
    """One followed stream: opened, then its keep-alives counted until the window is over."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    await writer.drain()
    try:
        status = await asyncio.wait_for(reader.readline(), 120)
        if b" 200 " in status:
            streams.keep_alives[index] = 0
        streams.pending -= 1
        if streams.pending == 0:
            streams.opened.set()
        if streams.keep_alives[index] < 0:
            return
        await streams.opened.wait()
        while not streams.window_over.is_set():
            line = await asyncio.wait_for(reader.readline(), 3 * _KEEPALIVE_SECONDS + 5)
            if b": keep-alive" in line and not streams.window_over.is_set():
                streams.keep_alives[index] += 1
    except TimeoutError:
        pass
    finally:
        writer.close()


def _start_daphne() -> tuple[subprocess.Popen[bytes], int]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = dict(os.environ, AGENT_SSE_KEEPALIVE_SECONDS=str(_KEEPALIVE_SECONDS))
    command = [sys.executable, "-m", "daphne", "-b", "127.0.0.1", "-p", str(port)]
    server = subprocess.Popen(
        [*command, "config.asgi:application"],
        cwd=settings.BASE_DIR,
        env=env,
        stdout=subprocess.DEVNULL,  # daphne's access log
    )
    deadline = time.monotonic() + 20
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            return server, port
        except OSError:
            if time.monotonic() > deadline:
                server.kill()
                raise
            time.sleep(0.1)


def _rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def _percentile(values: list[float], percent: float) -> float:
    if not values:
        return float("nan")
    index = min(len(values) - 1, round(percent / 100 * (len(values) - 1)))
    return values[index]
