"""The rules of turns of ``run_create`` (services/runs.py): which runs of a thread a new
run must come after or wait for (``TurnRule``), and what a new user message does when its
thread is busy (``MultitaskStrategy``; docs/protocols/multitask.md)."""

from dataclasses import dataclass, replace

from django.conf import settings
from django.db.models import Q

from agent_runs.errors import MultitaskInvalid, RunNotLatest, ThreadBusy
from agent_runs.models import RUN_ACTIVE_STATUSES, MultitaskStrategy, Run, Thread
from agent_runs.services.lifecycle import runs_cancel_in_turn


@dataclass(frozen=True)
class TurnRule:
    """What the thread's runs must be for a new run to be created, checked in
    ``run_create``'s transaction once it holds the thread's row lock: runs are created only
    under that lock, so of two requests at once the second sees the first's run.

    ``chain``: the runs looked at are the run whose runId it is and the runs whose parent it
    is (an A2A task) rather than all the thread's. ``after_run_id``: the latest of them must
    be this run, the one the new run answers (``RunNotLatest``). ``idle``: none of them may
    be queued, running or paused (``ThreadBusy``)."""

    after_run_id: str | None = None
    idle: bool = True
    chain: str | None = None


# The strategies that cancel the run holding the thread's turn.
CANCELLING = (MultitaskStrategy.INTERRUPT, MultitaskStrategy.ROLLBACK)


def multitask_strategy(multitask: str | None, turn: TurnRule | None) -> MultitaskStrategy:
    """The strategy a new run goes by when its thread is busy (a run queued, running or
    parked, or an interrupt open): the request's, else ``MULTITASK_DEFAULT``, else the entry
    point's (``reject`` where its rule of turns wants an idle thread, else ``enqueue``)."""
    chosen = multitask or settings.MULTITASK_DEFAULT
    if not chosen:
        idle = turn is not None and turn.idle
        return MultitaskStrategy.REJECT if idle else MultitaskStrategy.ENQUEUE
    if chosen not in MultitaskStrategy.values:
        raise MultitaskInvalid("multitask")
    return MultitaskStrategy(chosen)


def turn_rule(turn: TurnRule | None, strategy: MultitaskStrategy) -> TurnRule | None:
    """The rule of turns a new user message meets: its entry point's, with ``idle`` as the
    strategy says (only ``reject`` refuses a busy thread)."""
    idle = strategy == MultitaskStrategy.REJECT
    if turn is None:
        return TurnRule() if idle else None
    return replace(turn, idle=idle)


def thread_interrupt(*, thread: Thread, rollback: bool, waited: set[int]) -> None:
    """Cancel the run holding the thread's turn (running or parked) and the runs that came
    to interrupt it and have not started (of two interrupts at once, the later wins), as
    ``run_cancel`` does, in the caller's transaction under the thread's row lock
    (``runs_cancel_in_turn``): their journals end before the new run exists, their jobs
    are stopped once it commits. The runs queued behind them
    stay queued. ``rollback``: those runs, and the runs that ``waited`` on the interrupts
    just withdrawn, leave the conversation (``Run.rolled_back``)."""
    holding = Q(status__in=(Run.Status.RUNNING, Run.Status.PAUSED)) | Q(
        status=Run.Status.QUEUED, jumps_queue=True
    )
    victims = list(Run.objects.filter(holding, thread=thread).order_by("-jumps_queue", "pk"))
    if rollback:
        Run.objects.filter(pk__in={*waited, *(run.pk for run in victims)}).update(rolled_back=True)
    runs_cancel_in_turn(runs=victims)


def turn_check(*, thread: Thread, rule: TurnRule) -> None:
    """The thread's runs meet ``rule``; the caller holds the thread's row lock (in READ
    COMMITTED each query sees every run committed before the lock was granted)."""
    runs = Run.objects.filter(thread=thread)
    if rule.chain is not None:
        runs = runs.filter(Q(run_id=rule.chain) | Q(parent_run_id=rule.chain))
    if rule.after_run_id is not None:
        latest = runs.order_by("-created_at", "-pk").values_list("run_id", flat=True).first()
        if latest != rule.after_run_id:
            raise RunNotLatest(rule.after_run_id)
    if rule.idle and runs.filter(status__in=RUN_ACTIVE_STATUSES).exists():
        raise ThreadBusy()
