"""Billing's domain errors, which every protocol renders in its own shape (by ``status``;
OpenAI Responses answers a ``budget_exceeded`` as the quota error its SDK knows)."""

from decimal import Decimal

from agent_runs.errors import DomainError


class BudgetExceeded(DomainError):
    """A limit of the caller's budget is reached: no run starts, and a run in progress
    makes no further model call."""

    code = "budget_exceeded"
    status = 402

    def __init__(self, *, period: str, limit: Decimal, currency: str) -> None:
        self.period = period
        name = "daily" if period == "day" else "monthly"
        super().__init__(
            f"budget exceeded: the {name} limit of {format_money(limit)} {currency} is reached"
        )


def format_money(amount: Decimal) -> str:
    """A limit as people write it: at least two decimals, no trailing zeros beyond them."""
    text = format(amount.normalize(), "f")
    whole, _, fraction = text.partition(".")
    return f"{whole}.{fraction.ljust(2, '0')}"
