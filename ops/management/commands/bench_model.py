"""Benchmark: the worker's CPU per model call and per streamed chunk (docs/benchmarks.md,
"2026-11-26: the lean model path").

Starts ``bench_provider`` in a process of its own (its CPU is not counted), points a
DeepSeek-shaped model id at it, and times in this process's CPU: ``--calls`` streamed calls
of the model alone (request, stream parsing, AgentScope's chunks, usage tracking), then
``--calls`` worker replies (AgentScope's agent with the structured output, the AG-UI mapping
and each event's wire JSON, as the job relays them), each answering ``--tokens`` tokens one
chunk per token. No database, no Redis.

``--usage-calls N`` then times N ``usage_record`` calls (a model call's usage row and its
daily totals, priced from the catalog) on the database: process CPU, wall time and
statements per call, for a throwaway user, run and price entry removed afterwards.

It spans the worker's runtime and billing, so it lives above both, in ``ops`` (the run core
never imports billing: agent_runs/ports.py).
"""

import subprocess
import sys
import time
import uuid
from datetime import timedelta
from decimal import Decimal
from typing import Any
from urllib.error import URLError
from urllib.request import urlopen

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from agent_runs.benchmarks import cpu_reference_line, cpu_reference_ms
from agent_runs.models import Run, Thread
from agent_runs.runtime.model_bench import PathFigures, model_path_bench
from billing.benchmarks import CALL_METADATA, CALL_USAGE
from billing.models import ModelDailyUsage, PriceCatalogEntry, PriceTier, UsageRecord
from billing.services import usage_record

_MODEL_ID = "deepseek/bench-model"


class Command(BaseCommand):
    help = "Time the worker's CPU per model call and per streamed chunk on a loopback model."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--tokens", type=int, default=100)
        parser.add_argument("--calls", type=int, default=200)
        parser.add_argument("--warmup", type=int, default=20)
        parser.add_argument("--port", type=int, default=9311, help="for bench_provider")
        parser.add_argument("--usage-calls", type=int, default=0, help="then time usage_record")

    def handle(self, *args: Any, **options: Any) -> None:
        reference_before, figures = _model_path_timed(options)
        self.stdout.write(
            f"{options['calls']} calls of {options['tokens']} tokens, CPU of this process"
        )
        for name, figure in zip(("model alone", "worker reply"), figures, strict=True):
            self.stdout.write(
                f"{name}: {figure.ms_per_call:.2f} ms/call, {figure.us_per_chunk:.1f} us/chunk "
                f"({figure.chunks / figure.calls:.0f} chunks, "
                f"{figure.events / figure.calls:.0f} AG-UI events per call)"
            )
        if options["usage_calls"]:
            self.stdout.write(_time_usage_record(options["usage_calls"]))
        self.stdout.write(cpu_reference_line(reference_before))


def _model_path_timed(options: dict[str, Any]) -> tuple[float, list[PathFigures]]:
    """The model path timed against a ``bench_provider`` of its own; the CPU reference taken
    before, and the figures."""
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
    return reference_before, figures


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


def _time_usage_record(calls: int) -> str:
    model_id = f"bench/usage-{uuid.uuid4().hex[:8]}"
    user, run, entry = _priced_run(model_id)
    try:
        record = dict(
            run=run, stage="worker", model_id=model_id, usage=CALL_USAGE, metadata=CALL_METADATA
        )
        usage_record(**record)  # type: ignore[arg-type]  # the first call loads what it caches
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(calls):
            usage_record(**record)  # type: ignore[arg-type]
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        with CaptureQueriesContext(connection) as statements:
            usage_record(**record)  # type: ignore[arg-type]
    finally:
        UsageRecord.objects.filter(model_id=model_id).delete()
        ModelDailyUsage.objects.filter(model_id=model_id).delete()
        entry.delete()
        user.delete()  # its thread, run and daily totals with it
    return (
        f"usage_record: {calls} calls, {cpu * 1000 / calls:.3f} ms CPU and "
        f"{wall * 1000 / calls:.3f} ms wall per call, "
        f"{len(statements.captured_queries)} statements per call"
    )


def _priced_run(model_id: str) -> tuple[Any, Run, PriceCatalogEntry]:
    """A new user's run, and a catalog price for ``model_id`` (deleted after the timing)."""
    user = get_user_model().objects.create_user(f"bench-model-{uuid.uuid4().hex[:8]}")
    run = Run.objects.create(
        thread=Thread.objects.create(owner=user),
        run_id=f"bench-{uuid.uuid4().hex[:12]}",
        runtime_mode=Run.RuntimeMode.CHAT,
        input={},
        input_sha256="",
    )
    entry = PriceCatalogEntry.objects.create(
        model_id=model_id, source="bench", effective_from=timezone.now() - timedelta(days=1)
    )
    PriceTier.objects.create(
        entry=entry,
        input_cost_per_token=Decimal("0.00000028"),
        output_cost_per_token=Decimal("0.00000042"),
        cache_hit_cost_per_token=Decimal("0.000000028"),
    )
    return user, run, entry
