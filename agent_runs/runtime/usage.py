"""A run's model calls on the worker: each stage's (for its step's additional output), and
those whose usage is not recorded yet, recorded on the job's next trip to a database thread
that writes (a stage boundary, the answer's store, the run's end), before its transaction,
or at the job's end.

Only the worker imports this module.
"""

import logging
from dataclasses import dataclass, field
from typing import Any

from django.db import DatabaseError, InterfaceError, OperationalError, connection

from agent_runs import ports
from agent_runs.models import Run
from agent_runs.runtime import tracing
from agent_runs.runtime.chat_models import ModelCall, UsageLog
from agent_runs.runtime.demo_model import DEMO_MODEL_ID
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

    run: Run
    recorded_calls: int = 0
    # Each stage's model calls, for its step's additional output.
    stage_calls: dict[str, list[ModelCall]] = field(default_factory=dict)
    # Those whose usage is not recorded yet (``store_kept``).
    unrecorded: list[_Unrecorded] = field(default_factory=list)

    def keep(self, usage_log: UsageLog) -> None:
        """Keep the calls the log holds for the job's next write (``store_kept``): the model
        does not wait for the bookkeeping, which shares that write's trip to a database
        thread."""
        calls = usage_log.drain()
        self.stage_calls.setdefault(usage_log.stage, []).extend(calls)
        if calls:
            parent = tracing.current_context()  # the stage's span, with tracing on
            self.unrecorded.append(_Unrecorded(usage_log.stage, calls, parent))

    def store_kept(self) -> int:
        """Record the calls kept so far, on a database thread, outside any transaction; how
        many were. Each record is a statement of its own, committed at once: it adds to its
        day's totals, rows that every call of its model (and every call of its owner)
        shares, and a transaction keeps a row it changed locked until it commits, which
        would keep every other run's records waiting (docs/architecture.md, "The journal").
        A call is let go once recorded: a connection the database cut is raised (the
        caller's trip is tried again on a new one) with the calls not recorded yet kept."""
        if not connection.get_autocommit():
            raise RuntimeError("usage is recorded outside the caller's transaction")
        recorded = 0
        while self.unrecorded:
            item = self.unrecorded[0]
            while item.calls:
                if usage_store(self.run, item.stage, item.calls[0], item.parent):
                    recorded += 1
                    self.recorded_calls += 1
                del item.calls[0]
            del self.unrecorded[0]
        return recorded

    async def settle(self) -> None:
        """At the job's end: record what no write of the job recorded (a run that failed or
        was cancelled is billed for the calls it made too)."""
        if not self.unrecorded:
            return
        try:
            await db_retried(self.store_kept)
        except DatabaseError:  # the answer (or the failure) matters more than its bookkeeping
            calls = sum(len(item.calls) for item in self.unrecorded)
            logger.exception("run %s: the usage of %d calls not recorded", self.run.pk, calls)


def usage_store(run: Run, stage: str, call: ModelCall, trace_parent: Any = None) -> bool:
    """Record a model call of a stage (a failed or cancelled run is billed for the calls it
    made too), a statement of its own; whether it was. A record that fails is logged (the
    run goes on), but a connection the database cut is raised. With tracing on, the call is
    a span under ``trace_parent`` (the stage's context), with its cost."""
    record = None
    if call.model_id != DEMO_MODEL_ID:  # the offline demo model is not billed
        try:
            record = ports.billing().usage_record(
                run=run,
                stage=stage,
                model_id=call.model_id,
                usage=call.usage,
                metadata=call.metadata,
            )
        except (InterfaceError, OperationalError):
            raise  # the connection is gone: the caller's to try again on a new one
        except DatabaseError:
            # The answer matters more than its bookkeeping: keep the call for staff in the
            # log, and go on with the run.
            logger.exception("run %s: usage of a %s call not recorded: %s", run.pk, stage, call)
    if trace_parent is not None:
        tracing.model_call_span(
            call,
            parent=trace_parent,
            stage=stage,
            cost=None if record is None else record.cost,
            currency="" if record is None else record.currency,
            cost_source="" if record is None else record.cost_source,
        )
    return record is not None
