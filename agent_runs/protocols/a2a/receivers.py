"""The A2A edge's receiver of ``run_status_changed`` (named in ``AGENT_RUN_STATUS_RECEIVERS``),
light to import: it hears every run's changes in every process, workers included, and only
an A2A run's change loads the push notifications and the A2A SDK they need (tens of
megabytes a worker would otherwise carry for nothing)."""

from typing import Any

from agent_runs.models import Run

# agent_runs.protocols.a2a.selectors.PROTOCOL, without importing the SDK with it.
_PROTOCOL = "a2a"


def on_run_status(sender: type[Run], run: Run, status: Run.Status, **kwargs: Any) -> None:
    if run.request.get("protocol") != _PROTOCOL:
        return
    from agent_runs.protocols.a2a.push import on_run_status as push_on_run_status

    push_on_run_status(sender, run=run, status=status, **kwargs)
