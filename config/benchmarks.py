"""What the benchmark commands share."""

import time


def cpu_reference_ms() -> float:
    """A fixed pure-Python workload (a million additions): on a shared or throttled machine it
    shows how fast this CPU was while the figures were taken (about 30 ms unthrottled on the
    development machine)."""
    started = time.perf_counter()
    total = 0
    for number in range(1_000_000):
        total += number
    return (time.perf_counter() - started) * 1000
