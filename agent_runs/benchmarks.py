"""What the benchmark commands share."""

import time


def cpu_reference_ms() -> float:
    """A fixed pure-Python workload (a million additions): on a shared or throttled machine it
    shows how fast this CPU was while the figures were taken (docs/benchmarks.md)."""
    started = time.perf_counter()
    total = 0
    for number in range(1_000_000):
        total += number
    return (time.perf_counter() - started) * 1000


def cpu_reference_line(before_ms: float) -> str:
    """The line a benchmark ends with: the CPU reference taken before it and now."""
    return (
        f"CPU reference: {before_ms:.0f} ms before, {cpu_reference_ms():.0f} ms after "
        "(a fixed workload: higher means a slower, throttled CPU)"
    )
