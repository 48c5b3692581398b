"""``Run.protocol``: the protocol whose request made a run, set through ``run_create`` and,
for the runs made before the column, filled by its migration from what their rows say."""

import importlib
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from django.apps.registry import Apps
from django.contrib.auth.models import User

from agent_runs.models import Run
from agent_runs.run_input import ForwardedProps, InputMessage, RunAgentInput
from agent_runs.services.runs import run_create
from tests.agent_runs.migrations import migrated_back_to

pytestmark = pytest.mark.django_db(transaction=True)

_migration = importlib.import_module("agent_runs.migrations.0019_run_protocol")


@pytest.fixture
def alice(redis_queue: Any) -> User:
    return User.objects.create_user(username="alice")


def turn_input(thread_id: uuid.UUID, run_id: str) -> RunAgentInput:
    return RunAgentInput(
        thread_id=thread_id,
        run_id=run_id,
        messages=[InputMessage(id=f"msg-{run_id}", role="user", content="Hello")],
        forwarded_props=ForwardedProps(runtime_mode="chat"),
    )


def test_a_run_keeps_the_protocol_it_was_created_by_on_a_new_thread_and_an_existing_one(alice):
    thread_id = uuid.uuid4()

    first = run_create(user=alice, run_input=turn_input(thread_id, "r1"), protocol="a2a")
    second = run_create(
        user=alice, run_input=turn_input(thread_id, "r2"), protocol="openai_responses"
    )

    assert Run.objects.get(pk=first.pk).protocol == Run.Protocol.A2A
    assert Run.objects.get(pk=second.pk).protocol == Run.Protocol.OPENAI_RESPONSES


def test_a_run_no_protocol_names_is_ag_ui_s(alice):
    run = run_create(user=alice, run_input=turn_input(uuid.uuid4(), "r1"))

    assert Run.objects.get(pk=run.pk).protocol == Run.Protocol.AGUI


@pytest.fixture
def apps_at_0019(alice: User) -> Iterator[Apps]:
    with migrated_back_to("agent_runs", "0019_run_protocol") as apps:
        yield apps


def test_the_migration_tells_each_old_run_s_protocol_from_its_row(alice, apps_at_0019: Apps):
    old_run = apps_at_0019.get_model("agent_runs", "Run")
    thread = apps_at_0019.get_model("agent_runs", "Thread").objects.create(owner_id=alice.pk)
    rows: dict[str, dict[str, Any]] = {
        "a2a": {"request": {"protocol": "a2a", "task_id": "t"}},
        "agent_api": {"request": {"protocol": "agent_api", "session_id": "s"}},
        "agent_protocol": {"answer_artifact": True},
        "openai_responses": {"request": {"model": "m", "store": True, "background": False}},
        "agui": {"request": {"traceparent": "00-x"}},
    }
    for expected, fields in rows.items():
        old_run.objects.create(
            thread=thread,
            run_id=expected,
            runtime_mode="chat",
            input={},
            input_sha256="",
            protocol="agui",
            **fields,
        )

    _migration.protocol_fill(apps_at_0019, None)

    found = dict(old_run.objects.filter(thread=thread).values_list("run_id", "protocol"))
    assert found == {expected: expected for expected in rows}
