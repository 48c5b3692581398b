"""Billing's domain errors: ``BudgetExceeded`` is the run core's (``agent_runs.usage``: the
core stops a run with it), raised here when a limit is reached."""

from agent_runs.usage import BudgetExceeded, format_money

__all__ = ["BudgetExceeded", "format_money"]
