"""A2A push notifications as the unmodified a2a-sdk 1.3.0 client registers them, over real
HTTP against daphne, delivered by a real RQ worker from the outbox to a loopback receiver
(``PUSH_ALLOW_PRIVATE_URLS`` on in both processes): signed, with the client's token, a
working then a completed notification, retried with one idempotency key; private URLs
refused when the setting is off. docs/protocols/a2a.md, Push notifications; docs/push.md."""

import asyncio
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    SendMessageConfiguration,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import InvalidParamsError, TaskNotFoundError
from django.utils import timezone
from google.protobuf.json_format import MessageToDict

from agent_runs.models import CalendarEvent, Interrupt, PushConfig, PushDelivery, Run
from agent_runs.protocols.a2a.outbound import COMPLETED, INPUT_REQUIRED, TaskProjection
from agent_runs.push.signing import push_signature_verify
from agent_runs.services.interrupts import interrupts_expire
from tests.agent_runs.protocols.a2a.test_a2a_sdk import client_for, collect, message
from tests.agent_runs.protocols.a2a.test_approvals import (
    answer_over_rest,
    ask_approval,
    interrupts_of,
)
from tests.agent_runs.push.receiver import PushReceiver
from tests.conftest import DEMO, fake_model_env, serving, wait_for
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

# Pushes may go to loopback, and are retried at once (at the next sweep).
PUSH_ENV = {
    "PUSH_ALLOW_PRIVATE_URLS": "true",
    "PUSH_RETRY_BASE_SECONDS": "0",
    "AGENT_RUN_SWEEP_SECONDS": "5",  # the sweep starts the retries; its minimum
}
PUSHING = {**DEMO, **PUSH_ENV}
V1 = {"A2A-Version": "1.0"}


@pytest.fixture
def pushing_port(redis_queue: Any) -> Iterator[int]:
    """daphne and a worker that may push to loopback, retrying at once (at the next sweep)."""
    with serving(**PUSHING) as port:
        yield port


@pytest.fixture
def pushing_model(redis_queue: Any) -> Iterator[FakeOpenAI]:
    """As ``pushing_port``, the router's and the worker's model a loopback server the test
    steers."""
    with FakeOpenAI() as fake, serving(**fake_model_env(fake), **PUSH_ENV) as port:
        fake.port = port  # type: ignore[attr-defined]  # the test's handle on the server
        yield fake


def pushed_message(text: str, receiver: PushReceiver, token: str) -> Any:
    request = message(text)
    request.configuration.CopyFrom(
        SendMessageConfiguration(
            task_push_notification_config=TaskPushNotificationConfig(url=receiver.url, token=token)
        )
    )
    return request


def state_of(body: dict[str, Any]) -> str:
    update = body.get("task") or body.get("statusUpdate") or {}
    return str(update["status"]["state"])


def deliveries_done(task_id: str, count: int) -> bool:
    rows = PushDelivery.objects.filter(config__task_ref=task_id)
    return rows.filter(status=PushDelivery.Status.DELIVERED).count() == count


def in_outbox_order(received: list[Any]) -> list[Any]:
    """The pushes in the order the outbox made them (its rows' creation): a worker sends a
    task's deliveries as jobs it holds at once, so two may arrive the other way round."""
    made = dict(PushDelivery.objects.values_list("pk", "created_at"))
    return sorted(received, key=lambda r: made[uuid.UUID(r.headers["x-push-delivery"])])


def test_a_task_s_updates_are_pushed_signed_with_the_client_s_token(pushing_port, alice_token):
    with PushReceiver() as receiver:

        async def scenario() -> list[dict[str, Any]]:
            alice = await client_for(pushing_port, alice_token)
            events = await collect(alice.send_message(pushed_message("Hello", receiver, "t-1")))
            await alice.close()
            return events

        events = asyncio.run(scenario())
        task_id = events[0]["task"]["id"]
        wait_for(lambda: deliveries_done(task_id, 2), seconds=30)

    config = PushConfig.objects.get(task_ref=task_id)
    assert (config.config_ref, config.token) == (task_id, "t-1")
    received = in_outbox_order(receiver.received)
    assert [state_of(r.body) for r in received] == [
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
    for request in received:
        assert request.headers["x-a2a-notification-token"] == "t-1"
        assert push_signature_verify(
            header=request.headers["x-push-signature"], body=request.raw, secret=config.secret
        )
    working, completed = (r.body for r in received)
    assert working["statusUpdate"]["taskId"] == task_id
    assert completed["task"]["id"] == task_id
    assert completed["task"]["contextId"] == events[0]["task"]["contextId"]
    assert completed["task"]["artifacts"][0]["parts"][0]["text"]
    keys = {r.headers["x-push-delivery"] for r in receiver.received}
    assert keys == {str(pk) for pk in PushDelivery.objects.values_list("pk", flat=True)}
    # The token is the client's secret: the run keeps no copy of it.
    assert (
        "taskPushNotificationConfig" not in Run.objects.get(run_id=task_id).request["configuration"]
    )


def test_a_receiver_failing_twice_gets_three_attempts_with_one_key_and_one_delivery(
    pushing_port, alice_token
):
    with PushReceiver(fail_each=2) as receiver:

        async def scenario() -> str:
            alice = await client_for(pushing_port, alice_token, streaming=False)
            request = pushed_message("Hello", receiver, "t-2")
            request.configuration.return_immediately = True
            (event,) = [event async for event in alice.send_message(request)]
            await alice.close()
            return str(MessageToDict(event)["task"]["id"])

        task_id = asyncio.run(scenario())
        wait_for(lambda: deliveries_done(task_id, 2), seconds=60)

    rows = list(PushDelivery.objects.filter(config__task_ref=task_id))
    assert sorted((row.status, row.attempts) for row in rows) == [("delivered", 3)] * 2
    for row in rows:
        tries = [r for r in receiver.received if r.headers["x-push-delivery"] == str(row.pk)]
        assert len(tries) == 3
        assert all(r.raw == tries[0].raw for r in tries)  # the same notification each time
    assert sorted(state_of(row.body) for row in rows) == [
        "TASK_STATE_COMPLETED",
        "TASK_STATE_WORKING",
    ]


def test_a_question_is_pushed_as_input_required_and_the_follow_up_to_the_same_config(
    pushing_model, alice_token
):
    model = pushing_model
    model.route = {"route": "clarify", "tools": []}
    model.output = {"result_type": "clarification", "status": "success"}
    model.answer = ["Which ", "calendar?"]

    with PushReceiver() as receiver:

        async def scenario() -> str:
            alice = await client_for(model.port, alice_token)
            asked = await collect(alice.send_message(pushed_message("Add it", receiver, "t-3")))
            task = asked[0]["task"]
            await asyncio.to_thread(wait_for, lambda: deliveries_done(task["id"], 2), 30)
            model.route = {"route": "answer", "tools": []}
            model.output = {"result_type": "unknown", "status": "success"}
            model.answer = ["Done."]
            follow = message("The work one", task_id=task["id"], context_id=task["contextId"])
            await collect(alice.send_message(follow))
            await alice.close()
            return str(task["id"])

        task_id = asyncio.run(scenario())
        wait_for(lambda: deliveries_done(task_id, 4), seconds=30)

    bodies = [r.body for r in in_outbox_order(receiver.received)]
    assert [state_of(body) for body in bodies] == [
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
    question = bodies[1]["task"]["status"]["message"]
    assert question["role"] == "ROLE_AGENT" and question["parts"][0]["text"] == "Which calendar?"
    assert bodies[2]["statusUpdate"]["taskId"] == task_id  # the follow-up is the same task
    texts = [m["parts"][0].get("text") for m in bodies[3]["task"]["history"]]
    assert texts == ["Add it", "Which calendar?", "The work one", "Done."]
    assert {r.headers["x-a2a-notification-token"] for r in receiver.received} == {"t-3"}


def test_an_approval_opening_is_pushed_and_its_answer_from_elsewhere_too(
    pushing_model, alice_token
):
    """An interrupt that opens is pushed as the task input-required with the interrupt's data
    part; answered with the REST endpoint (not over A2A), the run that goes on pushes to the
    same config."""
    model = pushing_model
    ask_approval(model)

    with PushReceiver() as receiver:

        async def scenario() -> str:
            alice = await client_for(model.port, alice_token)
            request = pushed_message("Put a standup in my calendar", receiver, "t-4")
            asked = await collect(alice.send_message(request))
            await alice.close()
            return str(asked[0]["task"]["id"])

        task_id = asyncio.run(scenario())
        wait_for(lambda: deliveries_done(task_id, 2), seconds=30)
        opened = in_outbox_order(receiver.received)[1].body
        (interrupt,) = interrupts_of(opened["task"]["status"]["message"])
        answered = answer_over_rest(model.port, alice_token, interrupt["id"], {"approved": True})
        assert answered.status_code == 200, answered.text
        wait_for(lambda: deliveries_done(task_id, 4), seconds=30)

    bodies = [r.body for r in in_outbox_order(receiver.received)]
    assert [state_of(body) for body in bodies] == [
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_WORKING",
        "TASK_STATE_COMPLETED",
    ]
    assert opened["task"]["id"] == task_id
    assert interrupt["tool"] == "calendar_create" and interrupt["toolCallId"] == "call_c1"
    assert Interrupt.objects.get(pk=interrupt["id"]).status == Interrupt.Status.RESOLVED
    assert bodies[2]["statusUpdate"]["taskId"] == task_id
    history = bodies[3]["task"]["history"]
    assert history[2]["parts"][0]["data"] == {"interruptId": interrupt["id"], "approved": True}
    assert history[3]["parts"][0]["text"] == "Done."
    assert list(CalendarEvent.objects.values_list("title", flat=True)) == ["Standup"]
    assert {r.headers["x-a2a-notification-token"] for r in receiver.received} == {"t-4"}


def test_an_approval_that_expires_is_pushed_as_the_task_failed(pushing_model, alice_token):
    """The sweeper's expiry of the task's approval tells its push configs: the task failed."""
    model = pushing_model
    ask_approval(model)

    with PushReceiver() as receiver:

        async def scenario() -> str:
            alice = await client_for(model.port, alice_token)
            request = pushed_message("Put a standup in my calendar", receiver, "t-5")
            asked = await collect(alice.send_message(request))
            await alice.close()
            return str(asked[0]["task"]["id"])

        task_id = asyncio.run(scenario())
        wait_for(lambda: deliveries_done(task_id, 2), seconds=30)
        Interrupt.objects.update(expires_at=timezone.now() - timedelta(seconds=1))
        assert interrupts_expire() == 1
        wait_for(lambda: deliveries_done(task_id, 3), seconds=30)

    bodies = [r.body for r in in_outbox_order(receiver.received)]
    assert [state_of(body) for body in bodies] == [
        "TASK_STATE_WORKING",
        "TASK_STATE_INPUT_REQUIRED",
        "TASK_STATE_FAILED",
    ]
    assert bodies[2]["task"]["id"] == task_id
    assert interrupts_expire() == 0  # told once


def test_configs_are_created_read_listed_and_deleted_by_their_owner_only(
    pushing_port, alice_token, bob_token
):
    async def scenario() -> dict[str, Any]:
        alice = await client_for(pushing_port, alice_token)
        bob = await client_for(pushing_port, bob_token, streaming=False)
        task_id = (await collect(alice.send_message(message("Hello"))))[0]["task"]["id"]
        url = "http://127.0.0.1:9/hook"
        seen: dict[str, Any] = {"task_id": task_id}
        seen["created"] = await alice.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task_id, id="mine", url=url, token="tok")
        )
        seen["defaulted"] = await alice.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task_id, url=url)
        )
        seen["got"] = await alice.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id="mine")
        )
        seen["listed"] = await alice.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        for name, call in {
            "bob_create": bob.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task_id, url=url)
            ),
            "bob_get": bob.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id="mine")
            ),
            "bob_delete": bob.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="mine")
            ),
        }.items():
            try:
                await call
            except Exception as exc:  # the SDK raises the A2A error of the code
                seen[name] = exc
        await alice.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="mine")
        )
        seen["after"] = await alice.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        try:
            await alice.get_task_push_notification_config(
                GetTaskPushNotificationConfigRequest(task_id=task_id, id="mine")
            )
        except Exception as exc:  # the SDK raises the A2A error of the code
            seen["gone"] = exc
        await alice.close()
        await bob.close()
        return seen

    seen = asyncio.run(scenario())

    task_id = seen["task_id"]
    created = MessageToDict(seen["created"])
    assert created == {"id": "mine", "taskId": task_id, "url": "http://127.0.0.1:9/hook"} | {
        "token": "tok"
    }
    assert MessageToDict(seen["got"]) == created
    assert seen["defaulted"].id == task_id  # no id: the task's, as the SDK's server does
    assert sorted(c.id for c in seen["listed"].configs) == sorted(["mine", task_id])
    for name in ("bob_create", "bob_get", "bob_delete", "gone"):
        assert isinstance(seen[name], TaskNotFoundError), name
    assert [c.id for c in seen["after"].configs] == [task_id]
    assert PushConfig.objects.filter(task_ref=task_id).count() == 1


def test_the_0_3_names_set_get_list_and_delete(pushing_port, alice_token):
    async def scenario() -> dict[str, Any]:
        alice = await client_for(pushing_port, alice_token, legacy=True)
        task_id = (await collect(alice.send_message(message("Hello"))))[0]["task"]["id"]
        url = "http://127.0.0.1:9/hook"
        seen: dict[str, Any] = {"task_id": task_id}
        seen["set"] = await alice.create_task_push_notification_config(
            TaskPushNotificationConfig(task_id=task_id, id="c1", url=url, token="tok")
        )
        seen["got"] = await alice.get_task_push_notification_config(
            GetTaskPushNotificationConfigRequest(task_id=task_id, id="c1")
        )
        seen["listed"] = await alice.list_task_push_notification_configs(
            ListTaskPushNotificationConfigsRequest(task_id=task_id)
        )
        await alice.delete_task_push_notification_config(
            DeleteTaskPushNotificationConfigRequest(task_id=task_id, id="c1")
        )
        await alice.close()
        return seen

    seen = asyncio.run(scenario())

    expected = {"id": "c1", "taskId": seen["task_id"], "url": "http://127.0.0.1:9/hook"}
    assert MessageToDict(seen["set"]) == {**expected, "token": "tok"}
    assert MessageToDict(seen["got"]) == {**expected, "token": "tok"}
    assert [c.id for c in seen["listed"].configs] == ["c1"]
    assert not PushConfig.objects.filter(task_ref=seen["task_id"]).exists()


def rpc(port: int, token: str, body: dict[str, Any], **headers: str) -> dict[str, Any]:
    answer = httpx.post(
        f"http://127.0.0.1:{port}/a2a",
        json={"jsonrpc": "2.0", "id": 1, **body},
        headers={"Authorization": f"Bearer {token}", **headers},
        timeout=30,
    )
    assert answer.status_code == 200
    result: dict[str, Any] = answer.json()
    return result


def test_a_private_address_is_refused_with_invalid_params(port, alice_token):
    async def scenario() -> tuple[str, Exception | None]:
        alice = await client_for(port, alice_token)
        task_id = (await collect(alice.send_message(message("Hello"))))[0]["task"]["id"]
        try:
            await alice.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task_id, url="http://10.0.0.1/hook")
            )
        except Exception as exc:  # the SDK raises the A2A error of the code
            return task_id, exc
        finally:
            await alice.close()
        return task_id, None

    task_id, refused = asyncio.run(scenario())
    runs_before = Run.objects.count()
    metadata = rpc(
        port,
        alice_token,
        {
            "method": "tasks/pushNotificationConfig/set",
            "params": {
                "taskId": task_id,
                "pushNotificationConfig": {"url": "http://169.254.169.254/latest"},
            },
        },
    )
    sent = rpc(
        port,
        alice_token,
        {
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Hi"}]},
                "configuration": {"taskPushNotificationConfig": {"url": "http://127.0.0.1/h"}},
            },
        },
        **V1,
    )

    assert isinstance(refused, InvalidParamsError)
    assert "private, loopback, link-local" in str(refused)
    assert metadata["error"]["code"] == -32602
    assert "push notification URL refused" in metadata["error"]["message"]
    assert sent["error"]["code"] == -32602
    assert Run.objects.count() == runs_before  # a refused send writes no run
    assert not PushConfig.objects.exists()


def test_a_stranger_s_or_an_unknown_task_has_no_configs(port, alice_token, bob_token):
    created = rpc(
        port,
        alice_token,
        {
            "method": "SendMessage",
            "params": {
                "message": {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Hi"}]},
                "configuration": {"returnImmediately": True},
            },
        },
        **V1,
    )["result"]["task"]
    for method, params in [
        ("ListTaskPushNotificationConfigs", {"taskId": created["id"]}),
        ("GetTaskPushNotificationConfig", {"taskId": created["id"], "id": created["id"]}),
        ("ListTaskPushNotificationConfigs", {"taskId": str(uuid.uuid4())}),
    ]:
        answer = rpc(port, bob_token, {"method": method, "params": params}, **V1)
        assert answer["error"]["code"] == -32001, (method, answer)
    legacy = rpc(
        port, bob_token, {"method": "tasks/pushNotificationConfig/get", "params": {"id": "x"}}
    )
    assert legacy["error"]["code"] == -32001


def test_a_completed_run_whose_answer_is_a_question_is_pushed_as_input_required():
    projection = TaskProjection(task_id="t", context_id="c")
    projection.user_message({"messageId": "u", "role": "ROLE_USER", "parts": [{"text": "Hi"}]})
    projection.feed(
        [
            {"type": "RUN_STARTED"},
            {"type": "TEXT_MESSAGE_CONTENT", "messageId": "a", "delta": "Which one?"},
            {"type": "TEXT_MESSAGE_END", "messageId": "a", "resultType": "clarification"},
        ]
    )
    projection.settle(COMPLETED)  # the row completed; RUN_FINISHED is not written yet

    task = projection.task()
    assert task["status"]["state"] == INPUT_REQUIRED
    assert task["status"]["message"]["parts"][0]["text"] == "Which one?"

    plain = TaskProjection(task_id="t", context_id="c")
    plain.feed([{"type": "RUN_STARTED"}])
    plain.settle(COMPLETED)
    assert plain.task()["status"]["state"] == COMPLETED


def test_a_run_stopped_on_an_approval_is_input_required_with_the_interrupt():
    interrupt = {
        "id": "int-1",
        "reason": "tool_approval",
        "message": "Allow calendar_create to run with these arguments?",
        "toolCallId": "call_1",
        "responseSchema": {"type": "object", "required": ["approved"]},
        "expiresAt": "2026-03-18T09:00:00Z",
        "metadata": {"toolName": "calendar_create", "arguments": {"title": "Standup"}},
    }
    projection = TaskProjection(task_id="t", context_id="c")
    projection.user_message({"messageId": "u", "role": "ROLE_USER", "parts": [{"text": "Add"}]})
    events: list[dict[str, Any]] = [
        {"type": "RUN_STARTED"},
        {"type": "CUSTOM", "name": "run_interrupted", "value": {"interrupts": [interrupt]}},
    ]
    projection.feed(events)
    projection.settle(COMPLETED)  # the row completed; RUN_FINISHED is not written yet

    task = projection.task()
    assert task["status"]["state"] == INPUT_REQUIRED
    text, data = task["status"]["message"]["parts"]
    assert "calendar_create" in text["text"] and "approve" in text["text"]
    assert data["data"]["interrupt"] == {
        "id": "int-1",
        "reason": "tool_approval",
        "toolCallId": "call_1",
        "tool": "calendar_create",
        "arguments": {"title": "Standup"},
        "message": "Allow calendar_create to run with these arguments?",
        "responseSchema": {"type": "object", "required": ["approved"]},
        "expiresAt": "2026-03-18T09:00:00Z",
    }
    assert projection.approval_ids == ["int-1"]
    # Replayed from the journal (RUN_FINISHED written), the same task.
    replay = TaskProjection(task_id="t", context_id="c")
    replay.user_message({"messageId": "u", "role": "ROLE_USER", "parts": [{"text": "Add"}]})
    replay.feed([*events, {"type": "RUN_FINISHED"}])
    assert replay.task() == task
    # Expired unanswered: the task has failed, saying so.
    (update,) = projection.approvals_closed(expired=True)
    assert update["statusUpdate"]["status"]["state"] == "TASK_STATE_FAILED"
    assert projection.approval_ids == []
