"""Benchmark: the worker's CPU per model call and per streamed chunk (docs/benchmarks.md,
"2026-11-26: the lean model path").

Starts ``bench_provider`` in a process of its own (its CPU is not counted), points a
DeepSeek-shaped model id at it, and times in this process's CPU: ``--calls`` streamed calls
of the model alone (request, stream parsing, AgentScope's chunks, usage tracking), then
``--calls`` worker replies (AgentScope's agent with the structured output, the AG-UI mapping
and each event's wire JSON, as the job relays them), each answering ``--tokens`` tokens one
chunk per token. No database, no Redis.
"""

import subprocess
import sys
import time
from typing import Any
from urllib.error import URLError
from urllib.request import urlopen

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from agent_runs.runtime.model_bench import model_path_bench
from config.benchmarks import cpu_reference_line, cpu_reference_ms

_MODEL_ID = "deepseek/bench-model"


class Command(BaseCommand):
    help = "Time the worker's CPU per model call and per streamed chunk on a loopback model."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tokens", type=int, default=100)
        parser.add_argument("--calls", type=int, default=200)
        parser.add_argument("--warmup", type=int, default=20)
        parser.add_argument("--port", type=int, default=9311, help="for bench_provider")

    def handle(self, *args: Any, **options: Any) -> None:
        port = options["port"]
        provider = subprocess.Popen(
            [sys.executable, "-m", "django", "bench_provider", "--port", str(port)],
            stdout=subprocess.DEVNULL,
        )
        try:
            _wait_for(port)
            settings.DEEPSEEK_API_KEY = "bench"
            settings.DEEPSEEK_BASE_URL = f"http://127.0.0.1:{port}/v1"
            reference_before = cpu_reference_ms()
            figures = model_path_bench(
                model_id=_MODEL_ID,
                tokens=options["tokens"],
                calls=options["calls"],
                warmup=options["warmup"],
            )
        finally:
            provider.terminate()
            provider.wait(timeout=10)
        self.stdout.write(
            f"{options['calls']} calls of {options['tokens']} tokens, CPU of this process"
        )
        for name, figure in zip(("model alone", "worker reply"), figures, strict=True):
            self.stdout.write(
                f"{name}: {figure.ms_per_call:.2f} ms/call, {figure.us_per_chunk:.1f} us/chunk "
                f"({figure.chunks / figure.calls:.0f} chunks, "
                f"{figure.events / figure.calls:.0f} AG-UI events per call)"
            )
        self.stdout.write(cpu_reference_line(reference_before))


def _wait_for(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urlopen(f"http://127.0.0.1:{port}/", timeout=1)
        except URLError as exc:
            if "refused" not in str(exc.reason).lower():
                return  # it answered (its GET is a 501)
        except OSError:
            pass
        else:
            return
        time.sleep(0.2)
    raise CommandError(f"bench_provider did not start on port {port}")
