"""Reads of a run's usage, which billing records: through the run core's ``billing`` port
(agent_runs/ports.py)."""

from datetime import datetime

from agent_runs import ports
from agent_runs.models import Run
from agent_runs.usage import UsageSummary


def run_usage_summary(*, run: Run, recorded_by: datetime | None = None) -> UsageSummary:
    """The run's ``usage_summary`` (docs/spec/sse-events-and-usage.md 5.3) and cost (5.4-5.6),
    from its usage records; ``recorded_by``: only the records made by then."""
    return ports.billing().run_usage_summary(run=run, recorded_by=recorded_by)
