"""``run_status_changed``: the one hook the run core gives what sits beside it.

Sent inside the transaction that changed a run's status (claimed, completed, failed,
cancelled, paused, queued again on resume), or what its protocols show of it (its
interrupts expired unanswered: then its status as it stands), after the change, with
``sender=Run``, ``run`` (the run as it now is) and ``status`` (its new ``Run.Status``). A
receiver that writes (the push outbox's, agent_runs/push/receivers.py, whose rows a
protocol shapes) writes in that transaction: its rows commit or roll back with the change.
The core cannot call an edge (the one-way rule), which is why this is a signal and not a
service call.

Receivers are named in the setting ``AGENT_RUN_STATUS_RECEIVERS`` (dotted paths, connected
when the app is ready, in web and worker processes alike): the core and the runtime never
import an edge (docs/architecture.md, the one-way rule), and the push outbox's receiver
imports a protocol only to shape a notification a config waits for.

With no receiver it costs one check and no query: the services that change a status in one
statement (a claim, a completion) open a transaction only when someone listens.
"""

from contextlib import AbstractContextManager, nullcontext

from django.conf import settings
from django.db import transaction
from django.dispatch import Signal
from django.utils.module_loading import import_string

from agent_runs.models import Run

run_status_changed = Signal()


def run_status_heard() -> bool:
    """Whether any receiver listens (and so whether a change must be wrapped in a
    transaction and the run loaded to tell it)."""
    return run_status_changed.has_listeners(Run)


def run_status_transaction() -> AbstractContextManager[object]:
    """A transaction around a one-statement status change when someone listens, so the
    receivers' writes join it; nothing otherwise. Within a transaction already, it joins
    that one (no savepoint: an error there undoes the whole)."""
    return transaction.atomic(savepoint=False) if run_status_heard() else nullcontext()


def run_status_changed_send(*, run_pk: int, status: Run.Status, run: Run | None = None) -> None:
    """Tell the receivers, if any, that the run now has ``status``. Call it inside the
    transaction that made the change; ``run``: the run as it now is, with its thread, when
    the caller has it (else it is read)."""
    if not run_status_heard():
        return
    if run is None:
        run = Run.objects.select_related("thread").get(pk=run_pk)
    run_status_changed.send(sender=Run, run=run, status=status)


def run_status_receivers_connect() -> None:
    """Connect the receivers ``AGENT_RUN_STATUS_RECEIVERS`` names (once each)."""
    for path in settings.AGENT_RUN_STATUS_RECEIVERS:
        run_status_changed.connect(import_string(path), sender=Run, dispatch_uid=path)
