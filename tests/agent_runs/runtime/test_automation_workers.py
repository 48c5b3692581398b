"""Real worker processes fire due automation jobs in their sweep: each due time makes exactly
one run with two workers sweeping, and a worker killed while firing (SIGKILL, its claim not
committed) leaves the due time to the other, which fires it once."""

import datetime
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest
from django.contrib.auth import get_user_model
from django.db import connection, connections
from django.utils import timezone

from agent_runs.models import AutomationJob, Run, Thread
from agent_runs.services.automations import automation_job_create
from tests.agent_runs.concurrency import thread_lock_held
from tests.conftest import DEMO, start_worker, stop_process, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

# The least sweep interval there is: the workers fire due jobs this often.
SWEEPING = {**DEMO, "AGENT_RUN_SWEEP_SECONDS": "5"}
# A schedule that falls due only on 1 January: in these tests a job is due when the test
# sets its next_run_at in the past, each time to a minute of its own (a run's id names it).
YEARLY = "0 0 1 1 *"


@pytest.fixture
def alice_user(alice_token):
    return get_user_model().objects.get(username="alice")


def jobs_of(user, count: int, **fields) -> list[AutomationJob]:
    return [
        automation_job_create(
            owner=user,
            name=f"job-{index}",
            schedule=YEARLY,
            timezone="UTC",
            prompt="Anything new?",
            **fields,
        )
        for index in range(count)
    ]


def make_due(jobs: list[AutomationJob], minutes_ago: int) -> datetime.datetime:
    due = timezone.now().replace(second=0, microsecond=0) - datetime.timedelta(minutes=minutes_ago)
    AutomationJob.objects.filter(pk__in=[job.pk for job in jobs]).update(next_run_at=due)
    return due


def none_due() -> bool:
    return not AutomationJob.objects.filter(next_run_at__lte=timezone.now()).exists()


def fired_at_least(count: int) -> Callable[[], bool]:
    """Whether no job is due any more and ``count`` runs are made."""
    return lambda: none_due() and Run.objects.count() >= count


def all_ended() -> bool:
    return not Run.objects.exclude(status=Run.Status.COMPLETED).exists()


def fired_times() -> list[tuple[str, str]]:
    return sorted(
        (run.automation_job, run.request["automation"]["latestDueAt"]) for run in Run.objects.all()
    )


def test_two_workers_sweeping_make_exactly_one_run_per_due_time(alice_user, redis_queue):
    jobs = jobs_of(alice_user, 15)
    workers = [start_worker(**SWEEPING), start_worker(**SWEEPING)]
    try:
        expected = []
        for round_ in range(3):
            due = make_due(jobs, minutes_ago=round_ + 1)
            expected += [(job.name, due.isoformat()) for job in jobs]
            wait_for(fired_at_least(len(expected)), 90)
        wait_for(all_ended, 90)
    finally:
        for worker in workers:
            stop_process(worker)

    assert fired_times() == sorted(expected)  # one run per job and due time, none twice
    assert set(Run.objects.values_list("runtime_mode", flat=True)) == {"automation"}
    assert {run.thread.owner_id for run in Run.objects.select_related("thread")} == {alice_user.pk}


@contextmanager
def thread_locked_elsewhere(thread_id) -> Iterator[None]:
    """The thread's row lock held on a connection of its own until the block ends: a worker
    firing a job on that thread waits in ``run_create``, its claim of the job not committed."""
    locked, release = threading.Event(), threading.Event()

    def hold() -> None:
        try:
            with thread_lock_held(thread_id):
                locked.set()
                release.wait(120)
        finally:
            connections.close_all()

    holder = threading.Thread(target=hold)
    holder.start()
    assert locked.wait(10)
    try:
        yield
    finally:
        release.set()
        holder.join(30)


def waiting_on_a_lock() -> bool:
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT count(*) FROM pg_stat_activity "
            "WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        return bool(cursor.fetchone()[0])


def test_a_worker_killed_while_firing_leaves_the_due_time_to_another_which_fires_it_once(
    alice_user, redis_queue
):
    thread = Thread.objects.create(owner=alice_user)
    stuck, *others = jobs_of(alice_user, 4)
    AutomationJob.objects.filter(pk=stuck.pk).update(
        thread_policy=AutomationJob.ThreadPolicy.SAME, thread=thread
    )
    with thread_locked_elsewhere(thread.pk):
        doomed = start_worker(**SWEEPING)
        try:
            # The stuck job first: the doomed worker's sweep waits on it, holding its claim.
            stuck_due = make_due([stuck], minutes_ago=2)
            others_due = make_due(others, minutes_ago=1)
            wait_for(waiting_on_a_lock, 90)
            doomed.send_signal(signal.SIGKILL)
            doomed.wait()
        finally:
            if doomed.poll() is None:
                doomed.kill()
        survivor = start_worker(**SWEEPING)
        try:
            # The survivor fires the others; the stuck job's row is still locked by the
            # dead worker's transaction, which PostgreSQL has not ended yet: skipped.
            wait_for(lambda: Run.objects.count() == len(others), 90)
            assert not Run.objects.filter(automation_job=stuck.name).exists()
            assert AutomationJob.objects.get(pk=stuck.pk).next_run_at == stuck_due
        except BaseException:
            stop_process(survivor)
            raise
    try:
        # The lock let go, the dead worker's transaction ends uncommitted: the survivor's
        # next sweep fires the stuck job's due time, once.
        wait_for(lambda: Run.objects.filter(automation_job=stuck.name).exists(), 90)
        wait_for(all_ended, 90)
    finally:
        stop_process(survivor)

    fired = [(stuck.name, stuck_due.isoformat())]
    fired += [(job.name, others_due.isoformat()) for job in others]
    assert fired_times() == sorted(fired)
    run = Run.objects.get(automation_job=stuck.name)
    assert run.thread_id == thread.pk and run.status == Run.Status.COMPLETED
