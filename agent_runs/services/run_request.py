"""The knobs a protocol's request sets on a run and the core acts on, kept in ``Run.request``
(what the request asked beyond its input) rather than as columns of the core's model: each
serves one protocol (the Agent Protocol's tasks)."""

from typing import Any

from agent_runs.models import Run

# The run is stepped through by its client: how many stages it may run in all before it
# parks (``paused``) until given more; absent: straight through. Read by the job at each
# stage boundary in the same statement as the run's pause flag (services/steps.py).
STEP_BUDGET_KEY = "step_budget"
# The run's final answer is kept as a file artifact of the thread (present and true).
ANSWER_ARTIFACT_KEY = "answer_artifact"


def run_request_with_knobs(
    request: dict[str, Any], *, step_budget: int | None, answer_artifact: bool
) -> dict[str, Any]:
    """``request`` with the knobs a run is created with (only those it sets)."""
    knobs: dict[str, Any] = {}
    if step_budget is not None:
        knobs[STEP_BUDGET_KEY] = step_budget
    if answer_artifact:
        knobs[ANSWER_ARTIFACT_KEY] = True
    return {**request, **knobs} if knobs else request


def run_step_budget(run: Run) -> int | None:
    """How many stages the run may run in all (``None``: straight through)."""
    budget = (run.request or {}).get(STEP_BUDGET_KEY)
    return None if budget is None else int(budget)


def run_keeps_answer(run: Run) -> bool:
    """Whether the run's final answer is kept as a file artifact of its thread."""
    return bool((run.request or {}).get(ANSWER_ARTIFACT_KEY))
