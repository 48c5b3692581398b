"""A run's model calls on the worker: each stage's (for its step's additional output), and
those whose usage is not recorded yet, recorded in the job's next write (a stage boundary,
the answer's store, the run's end) as its last statements, or at the job's end.

Only the worker imports this module.
"""

import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from django.db import DatabaseError, transaction

from agent_runs.runtime import tracing
from agent_runs.runtime.chat_models import ModelCall, UsageLog
from agent_runs.runtime.host import db_retried

logger = logging.getLogger(__name__)


@dataclass(eq=False)
class _Unrecorded:
    """A stage's model calls whose usage is to be recorded, with the tracing context of the
    stage (their spans' parent, with tracing on)."""

    stage: str
    calls: list[ModelCall]
    parent: Any


@dataclass
class RunUsage:
    """The model calls of one run's job."""

    run_pk: int
    # Records a stage's model calls (with tracing on, under the trace context it is given);
    # gives how many it recorded.
    store: Callable[[str, list[ModelCall], Any], int]
    recorded_calls: int = 0
    # Each stage's model calls, for its step's additional output.
    stage_calls: dict[str, list[ModelCall]] = field(default_factory=dict)
    # Those whose usage is not recorded yet (``store_kept``).
    unrecorded: list[_Unrecorded] = field(default_factory=list)

    def keep(self, usage_log: UsageLog) -> None:
        """Keep the calls the log holds for the job's next write (``store_kept``): the model
        does not wait for the bookkeeping, and the records share that write's commit."""
        calls = usage_log.drain()
        self.stage_calls.setdefault(usage_log.stage, []).extend(calls)
        if calls:
            parent = tracing.current_context()  # the stage's span, with tracing on
            self.unrecorded.append(_Unrecorded(usage_log.stage, calls, parent))

    def store_kept(self) -> int:
        """Record the calls kept so far, on a database thread, in the caller's transaction
        (its last statements: a call's day totals stay locked until the commit) or on their
        own; how many were. They are let go once it commits: a transaction that fails leaves
        them for the next write, or for the job's end (``settle``)."""
        pending = list(self.unrecorded)
        recorded = sum(self.store(item.stage, item.calls, item.parent) for item in pending)
        transaction.on_commit(partial(self._recorded, pending, recorded))
        return recorded

    def _recorded(self, pending: list[_Unrecorded], recorded: int) -> None:
        self.unrecorded = [item for item in self.unrecorded if item not in pending]
        self.recorded_calls += recorded

    async def settle(self) -> None:
        """At the job's end: record what no write of the job recorded (a run that failed or
        was cancelled is billed for the calls it made too)."""
        if not self.unrecorded:
            return
        try:
            await db_retried(self.store_kept)
        except DatabaseError:  # the answer (or the failure) matters more than its bookkeeping
            calls = sum(len(item.calls) for item in self.unrecorded)
            logger.exception("run %s: the usage of %d calls not recorded", self.run_pk, calls)
