"""The push outbox's receiver of ``run_status_changed`` (named in
``AGENT_RUN_STATUS_RECEIVERS``), light to import: it hears every run's changes in every
process, workers included. A run's change is pushed by the protocol that made the run
(``Run.protocol``), through the notifier ``PUSH_NOTIFIERS`` names for it; that protocol's
module is imported only when a config waits for the change (the first notification a
process sends), so a worker that sends none never loads a protocol (nor the A2A SDK's tens
of megabytes)."""

from typing import Any

from django.conf import settings
from django.utils.module_loading import import_string

from agent_runs.models import Run
from agent_runs.push.selectors import push_configs_for_run

# The statuses a change of is pushed: a run that starts, and its end; queued and paused
# are not.
PUSHED_STATUSES = frozenset(
    {Run.Status.RUNNING, Run.Status.COMPLETED, Run.Status.FAILED, Run.Status.CANCELLED}
)


def on_run_status(sender: type[Run], run: Run, status: Run.Status, **kwargs: Any) -> None:
    """One outbox row per config of the run's task (its chain: the run that began it), in
    the transaction of the change, in the shape of the run's protocol. No query for a run of
    a protocol that pushes nothing, or for a status not pushed; one when the task has no
    config."""
    notifier = settings.PUSH_NOTIFIERS.get(run.protocol)
    if notifier is None or status not in PUSHED_STATUSES:
        return
    task_id = run.parent_run_id or run.run_id
    configs = list(push_configs_for_run(run=run, protocol=run.protocol).filter(task_ref=task_id))
    if configs:
        import_string(notifier)(run=run, status=status, configs=configs)
