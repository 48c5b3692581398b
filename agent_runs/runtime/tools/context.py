"""What every tool of a run shares: the run it works for. Tools run their ORM work with
``agent_runs.db.db_call``."""

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ToolContext:
    """What a run's tools know about the run."""

    user_id: int
    run_pk: int
    client_time: dict[str, Any] | None
