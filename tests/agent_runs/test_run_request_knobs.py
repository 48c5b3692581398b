"""A run's step budget and its answer kept as an artifact: knobs of the Agent Protocol kept
in ``Run.request`` (services/run_request.py), moved there from the columns they were by
migration 0020, and back by its reverse."""

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps.registry import Apps
from django.contrib.auth.models import User

from agent_runs.models import Run
from agent_runs.run_input import ForwardedProps, InputMessage, RunAgentInput
from agent_runs.services.run_request import run_keeps_answer, run_step_budget
from agent_runs.services.runs import RunOptions, run_create
from tests.agent_runs.migrations import migrate_to, migrated_back_to

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def alice(redis_queue: Any) -> User:
    return User.objects.create_user(username="alice")


def turn_input(run_id: str) -> RunAgentInput:
    return RunAgentInput(
        thread_id=uuid.uuid4(),
        run_id=run_id,
        messages=[InputMessage(id=f"msg-{run_id}", role="user", content="Hello")],
        forwarded_props=ForwardedProps(runtime_mode="chat"),
    )


def test_a_run_keeps_the_knobs_it_is_created_with_in_its_request_and_no_others(alice):
    stepped = run_create(
        user=alice,
        run_input=turn_input("r1"),
        options=RunOptions(step_budget=0, answer_artifact=True, request={"kept": 1}),
    )
    plain = run_create(user=alice, run_input=turn_input("r2"))

    stepped.refresh_from_db()
    plain.refresh_from_db()
    assert stepped.request["kept"] == 1
    assert (run_step_budget(stepped), run_keeps_answer(stepped)) == (0, True)
    assert stepped.status == Run.Status.PAUSED
    assert (run_step_budget(plain), run_keeps_answer(plain)) == (None, False)
    assert "step_budget" not in plain.request and "answer_artifact" not in plain.request


@pytest.fixture
def apps_at_0019(alice: User) -> Iterator[Apps]:
    with migrated_back_to("agent_runs", "0019_run_protocol") as apps:
        yield apps


def test_the_migration_moves_each_run_s_knobs_into_its_request_and_back(alice, apps_at_0019):
    old_run = apps_at_0019.get_model("agent_runs", "Run")
    thread = apps_at_0019.get_model("agent_runs", "Thread").objects.create(owner_id=alice.pk)
    rows: dict[str, dict[str, Any]] = {
        "stepped": {"step_budget": 2, "answer_artifact": True, "request": {"trace": "t"}},
        "task": {"answer_artifact": True},
        "plain": {"request": {"trace": "p"}},
    }
    for run_id, fields in rows.items():
        old_run.objects.create(
            thread=thread,
            run_id=run_id,
            runtime_mode="chat",
            input={},
            input_sha256="",
            **fields,
        )

    migrate_to("agent_runs", "0020_run_knobs_in_request")
    moved = dict(Run.objects.filter(thread_id=thread.pk).values_list("run_id", "request"))
    back_apps = migrate_to("agent_runs", "0019_run_protocol")
    # The model as it was at 0019 (Any: the type checker knows only the latest).
    run_at_0019: Any = back_apps.get_model("agent_runs", "Run")
    back = run_at_0019.objects.filter(thread_id=thread.pk)
    columns = back.values_list("run_id", "step_budget", "answer_artifact", "request")

    assert moved == {
        "stepped": {"trace": "t", "step_budget": 2, "answer_artifact": True},
        "task": {"answer_artifact": True},
        "plain": {"trace": "p"},
    }
    assert {run_id: tuple(rest) for run_id, *rest in columns} == {
        "stepped": (2, True, {"trace": "t"}),
        "task": (None, True, {}),
        "plain": (None, False, {"trace": "p"}),
    }
