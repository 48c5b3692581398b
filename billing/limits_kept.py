"""The users' spending limits each process keeps for a few seconds: ``budgets.user_limits``
reads them through it, and a budget saved or deleted in this process is forgotten here at once
(``Budget.save``). Below both, so neither imports the other."""

from typing import Any

LIMITS_KEPT_SECONDS = 5.0
KEPT_MAX = 10_000
# user id -> (when it was read, monotonic; its Limits)
kept: dict[Any, tuple[float, Any]] = {}


def limits_forget(*, user_id: Any) -> None:
    """Read the user's limits anew next time (their budget changed)."""
    kept.pop(user_id, None)
