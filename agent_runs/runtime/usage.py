"""A run's model calls on the worker: each stage's (for its step's additional output), and
those whose usage is not recorded yet, recorded on a trip of their own once the next
stage's first events are out (``store_soon``), or before the next write that reports usage
(the answer's store, the run's end, a budget's check: ``store_kept``), or at the job's end.

Only the worker imports this module.
"""

import asyncio
import logging
import threading
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

# How long a stage's calls wait at most, after the boundary that ends it, to be recorded
# (``RunUsage.store_later``): a real model's first token comes later than that.
_STORE_LATER_SECONDS = 0.05


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
    # One recording at a time: ``store_soon``'s trip, and the job's next write's.
    _storing: threading.Lock = field(default_factory=threading.Lock, repr=False)
    # The recording ``store_soon`` started, until the job's end has waited for it.
    _soon: "asyncio.Task[int] | None" = field(default=None, repr=False)
    # Whether the job's end has recorded what was left (``store_soon`` does nothing then).
    _settled: bool = field(default=False, repr=False)

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
        caller's trip is tried again on a new one) with the calls not recorded yet kept.
        One recording at a time: a call meanwhile waits for the one under way."""
        if not connection.get_autocommit():
            raise RuntimeError("usage is recorded outside the caller's transaction")
        with self._storing:
            return self._store_kept()

    def _store_kept(self) -> int:
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

    def store_soon(self) -> None:
        """Record the calls kept so far on a trip of their own, not waited for (the job goes
        on with its reply meanwhile); a ``store_kept`` that comes meanwhile waits for it.
        The router's call is recorded so once the worker's first events are out, or
        ``store_later``'s moment after the boundary between them, whichever comes first:
        the boundary reports no usage, and the first token does not wait for the record
        (its statement and its commit, 1.7 ms of a 25 ms first token here)."""
        if self._settled or not self.unrecorded:
            return
        if self._soon is not None and not self._soon.done():
            return
        self._soon = asyncio.get_running_loop().create_task(db_retried(self.store_kept))

    def store_later(self) -> None:
        """``store_soon`` in a moment (``_STORE_LATER_SECONDS``) at the latest: a call's record
        waits no longer than that for the next one's first events (a worker that dies
        meanwhile loses no more than that moment's records)."""
        asyncio.get_running_loop().call_later(_STORE_LATER_SECONDS, self.store_soon)

    async def settle(self) -> None:
        """At the job's end: record what no write of the job recorded (a run that failed or
        was cancelled is billed for the calls it made too)."""
        self._settled = True
        soon, self._soon = self._soon, None
        if soon is not None:
            # Not cancelled with the job: its trip ends as it would. What it could not
            # record is tried again below.
            await asyncio.wait([soon])
            if not soon.cancelled() and soon.exception() is not None:
                error = soon.exception()
                logger.warning("run %s: recording usage failed", self.run.pk, exc_info=error)
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
