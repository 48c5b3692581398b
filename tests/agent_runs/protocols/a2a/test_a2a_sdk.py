"""A2A as the unmodified a2a-sdk 1.3.0 Python client speaks it, over real HTTP against daphne,
with a real RQ worker running the stages (the demo model, or a loopback OpenAI-compatible
model server for slow answers, tool calls and clarifying questions): the 1.0 transport
(``A2A-Version: 1.0``) and the 0.3 one the same client falls back to for a 0.3 card.
docs/protocols/a2a.md."""

import asyncio
import json
import uuid
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, create_client
from a2a.client.errors import A2AClientError
from a2a.compat.v0_3 import types as types_v03
from a2a.types.a2a_pb2 import (
    AgentCard,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
)
from a2a.utils.errors import (
    TaskNotCancelableError,
    TaskNotFoundError,
    UnsupportedOperationError,
)
from google.protobuf.json_format import MessageToDict, ParseDict

from agent_runs.models import Run
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def card_of(port: int) -> dict[str, Any]:
    answer = httpx.get(f"http://127.0.0.1:{port}/.well-known/agent-card.json", timeout=10)
    assert answer.status_code == 200
    card: dict[str, Any] = answer.json()
    return card


async def client_for(port: int, token: str, *, legacy: bool = False, streaming: bool = True) -> Any:
    """The SDK's client from the served card: its 1.0 JSON-RPC transport, or (``legacy``)
    its 0.3 one, chosen by the SDK for a card that offers only the 0.3 interface."""
    http = httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60)
    config = ClientConfig(streaming=streaming, httpx_client=http)
    base = f"http://127.0.0.1:{port}"
    if not legacy:
        return await create_client(base, client_config=config)
    card = ParseDict(card_of(port), AgentCard(), ignore_unknown_fields=True)
    kept = [i for i in card.supported_interfaces if i.protocol_version.startswith("0.3")]
    del card.supported_interfaces[:]
    card.supported_interfaces.extend(kept)
    return await create_client(card, client_config=config)


def message(text: str, *, task_id: str = "", context_id: str = "") -> SendMessageRequest:
    return SendMessageRequest(
        message=Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            task_id=task_id,
            context_id=context_id,
        )
    )


def dumped(events: list[StreamResponse]) -> list[dict[str, Any]]:
    return [MessageToDict(event) for event in events]


def kinds(events: list[dict[str, Any]]) -> list[str]:
    return [next(iter(event)) for event in events]


def states(events: list[dict[str, Any]]) -> list[str]:
    return [
        event.get("task", event.get("statusUpdate", {})).get("status", {}).get("state", "")
        for event in events
        if "task" in event or "statusUpdate" in event
    ]


def answer_text(events: list[dict[str, Any]]) -> str:
    return "".join(
        part.get("text", "")
        for event in events
        if "artifactUpdate" in event
        for part in event["artifactUpdate"]["artifact"]["parts"]
    )


async def collect(stream: Any) -> list[dict[str, Any]]:
    return dumped([event async for event in stream])


def test_the_card_declares_streaming_bearer_auth_and_both_generations(port):
    card = card_of(port)

    assert card["capabilities"]["streaming"] is True
    assert card["capabilities"]["pushNotifications"] is True
    interfaces = card["supportedInterfaces"]
    assert interfaces[0]["url"].endswith("/a2a") and interfaces[0]["protocolVersion"] == "1.0"
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert card["securityRequirements"] == [{"schemes": {"bearer": {}}}]
    assert {skill["id"] for skill in card["skills"]} >= {"calendar_list"}
    # The 0.3 fields, read by the SDK's 0.3 model.
    legacy = types_v03.AgentCard.model_validate(card)
    assert legacy.url == interfaces[0]["url"] and legacy.preferred_transport == "JSONRPC"


@pytest.mark.parametrize("legacy", [False, True], ids=["1.0", "0.3"])
def test_a_streamed_task_runs_to_completion_and_get_task_rebuilds_it(port, alice_token, legacy):
    async def scenario() -> tuple[list[dict[str, Any]], dict[str, Any], dict[str, Any]]:
        client = await client_for(port, alice_token, legacy=legacy)
        events = await collect(client.send_message(message("Hello")))
        task_id = events[0]["task"]["id"]
        task = MessageToDict(await client.get_task(GetTaskRequest(id=task_id)))
        short = MessageToDict(await client.get_task(GetTaskRequest(id=task_id, history_length=1)))
        await client.close()
        return events, task, short

    events, task, short = asyncio.run(scenario())

    assert kinds(events)[0] == "task" and kinds(events)[1] == "statusUpdate"
    assert states(events)[:2] == ["TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"]
    assert states(events)[-1] == "TASK_STATE_COMPLETED"
    assert kinds(events)[-1] == "statusUpdate"
    chunks = [event["artifactUpdate"] for event in events if "artifactUpdate" in event]
    assert chunks and "append" not in chunks[0] and chunks[-1]["lastChunk"] is True
    text = answer_text(events)
    assert text
    run = Run.objects.get(run_id=events[0]["task"]["id"])
    assert run.status == Run.Status.COMPLETED and run.request["protocol"] == "a2a"
    assert uuid.UUID(run.run_id) and str(run.thread_id) == events[0]["task"]["contextId"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert [m["role"] for m in task["history"]] == ["ROLE_USER", "ROLE_AGENT"]
    assert task["history"][0]["parts"][0]["text"] == "Hello"
    assert task["history"][1]["parts"][0]["text"] == text
    assert task["artifacts"][0]["parts"][0]["text"] == text
    assert [m["role"] for m in short["history"]] == ["ROLE_AGENT"]


def test_a_blocking_send_answers_the_ended_task_and_list_tasks_finds_it(port, alice_token):
    async def scenario() -> tuple[list[dict[str, Any]], Any]:
        client = await client_for(port, alice_token, streaming=False)
        events = await collect(client.send_message(message("Hello", context_id="my-chat")))
        listed = await client.list_tasks(ListTasksRequest(include_artifacts=True))
        await client.close()
        return events, listed

    events, listed = asyncio.run(scenario())

    assert kinds(events) == ["task"]
    task = events[0]["task"]
    assert task["status"]["state"] == "TASK_STATE_COMPLETED"
    assert task["artifacts"][0]["parts"][0]["text"]
    assert [t.id for t in listed.tasks] == [task["id"]]
    assert listed.tasks[0].context_id == task["contextId"]


def test_a_tool_call_streams_as_status_updates_with_data_parts(port, alice_token):
    async def scenario() -> list[dict[str, Any]]:
        client = await client_for(port, alice_token)
        events = await collect(client.send_message(message("/tool calendar_list {}")))
        await client.close()
        return events

    events = asyncio.run(scenario())

    data = [
        part["data"]
        for event in events
        if "statusUpdate" in event and "message" in event["statusUpdate"]["status"]
        for part in event["statusUpdate"]["status"]["message"]["parts"]
        if "data" in part
    ]
    assert [next(iter(item)) for item in data] == ["toolCall", "toolResult"]
    assert data[0]["toolCall"]["name"] == "calendar_list"
    assert states(events)[-1] == "TASK_STATE_COMPLETED"


@pytest.mark.parametrize("legacy", [False, True], ids=["1.0", "0.3"])
def test_a_subscriber_mid_run_gets_the_rest_and_the_same_answer(model, alice_token, legacy):
    model.answer = [f"piece{i} " for i in range(6)]
    port = model.port

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        client = await client_for(port, alice_token, legacy=legacy)
        stream = client.send_message(message("Hello"))
        first = MessageToDict(await anext(stream))
        task_id = first["task"]["id"]
        # The model answers slowly: the subscriber joins while the run is working.
        model.delay = 1.0
        subscriber = await client_for(port, alice_token, legacy=legacy)
        joined = await collect(subscriber.subscribe(SubscribeToTaskRequest(id=task_id)))
        rest = await collect(stream)
        await client.close()
        await subscriber.close()
        return [first, *rest], joined

    events, joined = asyncio.run(scenario())

    assert kinds(joined)[0] == "task"
    assert states(joined)[-1] == states(events)[-1] == "TASK_STATE_COMPLETED"
    # The snapshot's artifact so far plus the pieces after it are the whole answer.
    snapshot = joined[0]["task"].get("artifacts", [])
    so_far = "".join(part.get("text", "") for a in snapshot for part in a["parts"])
    assert so_far + answer_text(joined[1:]) == answer_text(events)
    assert answer_text(events) == "".join(model.answer)


@pytest.mark.parametrize("legacy", [False, True], ids=["1.0", "0.3"])
def test_a_cancel_ends_the_task_and_a_second_cancel_is_not_cancelable(model, alice_token, legacy):
    model.delay = 5.0
    port = model.port

    async def scenario() -> tuple[list[dict[str, Any]], Any, Exception]:
        client = await client_for(port, alice_token, legacy=legacy)
        stream = client.send_message(message("Hello"))
        first = MessageToDict(await anext(stream))
        task_id = first["task"]["id"]
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
        rest = await collect(stream)
        with pytest.raises(TaskNotCancelableError) as again:
            await client.cancel_task(CancelTaskRequest(id=task_id))
        await client.close()
        return [first, *rest], canceled, again.value

    events, canceled, again = asyncio.run(scenario())

    assert MessageToDict(canceled)["status"]["state"] == "TASK_STATE_CANCELED"
    assert states(events)[-1] == "TASK_STATE_CANCELED"
    assert "cannot be canceled" in str(again)
    assert Run.objects.get(run_id=events[0]["task"]["id"]).status == Run.Status.CANCELLED


@pytest.mark.parametrize("legacy", [False, True], ids=["1.0", "0.3"])
def test_input_required_then_a_follow_up_on_the_same_task(model, alice_token, legacy):
    model.route = {"route": "clarify", "tools": []}
    model.output = {"result_type": "clarification", "status": "success"}
    model.answer = ["Which ", "calendar?"]
    port = model.port

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        client = await client_for(port, alice_token, legacy=legacy)
        asked = await collect(client.send_message(message("Add a meeting")))
        task = asked[0]["task"]
        model.route = {"route": "answer", "tools": []}
        model.output = {"result_type": "unknown", "status": "success"}
        model.answer = ["Done."]
        follow = message("The work one", task_id=task["id"], context_id=task["contextId"])
        answered = await collect(client.send_message(follow))
        whole = MessageToDict(await client.get_task(GetTaskRequest(id=task["id"])))
        await client.close()
        return asked, answered, whole

    asked, answered, whole = asyncio.run(scenario())

    assert states(asked)[-1] == "TASK_STATE_INPUT_REQUIRED"
    question = asked[-1]["statusUpdate"]["status"]["message"]
    assert question["role"] == "ROLE_AGENT" and question["parts"][0]["text"] == "Which calendar?"
    assert answered[0]["task"]["id"] == asked[0]["task"]["id"]
    assert states(answered)[0] == "TASK_STATE_SUBMITTED"
    assert states(answered)[-1] == "TASK_STATE_COMPLETED"
    assert answer_text(answered) == "Done."
    assert whole["status"]["state"] == "TASK_STATE_COMPLETED"
    texts = [m["parts"][0].get("text") for m in whole["history"]]
    assert texts == ["Add a meeting", "Which calendar?", "The work one", "Done."]
    runs = Run.objects.filter(thread_id=asked[0]["task"]["contextId"]).order_by("pk")
    assert [r.parent_run_id for r in runs] == ["", asked[0]["task"]["id"]]


def test_errors_carry_the_protocol_s_codes(port, alice_token, bob_token):
    async def scenario() -> dict[str, Exception]:
        alice = await client_for(port, alice_token)
        bob = await client_for(port, bob_token, streaming=False)
        events = await collect(alice.send_message(message("Hello")))
        task_id = events[0]["task"]["id"]
        errors: dict[str, Exception] = {}
        for name, call in {
            "stranger": bob.get_task(GetTaskRequest(id=task_id)),
            "unknown": alice.get_task(GetTaskRequest(id=str(uuid.uuid4()))),
            "cancel_ended": alice.cancel_task(CancelTaskRequest(id=task_id)),
            "subscribe_ended": collect(alice.subscribe(SubscribeToTaskRequest(id=task_id))),
            "follow_up_ended": collect(alice.send_message(message("More", task_id=task_id))),
        }.items():
            try:
                await call
            except (A2AClientError, Exception) as exc:
                errors[name] = exc
        await alice.close()
        await bob.close()
        return errors

    errors = asyncio.run(scenario())

    assert isinstance(errors["stranger"], TaskNotFoundError)
    assert isinstance(errors["unknown"], TaskNotFoundError)
    assert isinstance(errors["cancel_ended"], TaskNotCancelableError)
    assert isinstance(errors["subscribe_ended"], UnsupportedOperationError)
    assert isinstance(errors["follow_up_ended"], UnsupportedOperationError)


def raw(port: int, token: str | None, body: Any, **headers: str) -> httpx.Response:
    auth = {"Authorization": f"Bearer {token}"} if token else {}
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    return httpx.post(
        f"http://127.0.0.1:{port}/a2a",
        content=content,
        headers={"Content-Type": "application/json", **auth, **headers},
        timeout=30,
    )


def test_malformed_requests_get_json_rpc_errors_and_write_nothing(port, alice_token):
    v1 = {"A2A-Version": "1.0"}
    send = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage"}
    cases: list[tuple[Any, dict[str, str], int]] = [
        (b"{not json", v1, -32700),
        ([send], v1, -32600),
        ({"id": 1, "method": "GetTask"}, v1, -32600),
        ({"jsonrpc": "2.0", "id": 1, "method": "Nope"}, v1, -32601),
        ({**send, "params": {"message": {"parts": [{"text": "hi"}]}}}, {}, -32009),
        ({**send, "params": "x"}, v1, -32602),
        ({**send, "params": {"message": {"messageId": "m", "role": 7}}}, v1, -32602),
        ({**send, "params": {}}, v1, -32602),
        ({**send, "params": {"message": {"messageId": "m", "parts": [{"text": " "}]}}}, v1, -32602),
        (
            {**send, "params": {"message": {"messageId": "m", "parts": [{"url": "https://x/y"}]}}},
            v1,
            -32005,
        ),
        ({**send, "method": "message/send", "params": {"message": 5}}, {}, -32602),
        ({**send, "method": "GetTask", "params": {"id": "nope"}}, v1, -32001),
        ({**send, "method": "SubscribeToTask", "params": {"id": "nope"}}, v1, -32001),
        ({**send, "method": "tasks/pushNotificationConfig/get", "params": {"id": "x"}}, {}, -32001),
        ({**send, "method": "tasks/pushNotificationConfig/set", "params": {}}, {}, -32602),
        ({**send, "method": "GetExtendedAgentCard"}, v1, -32007),
    ]
    before = Run.objects.count()
    for body, headers, code in cases:
        answer = raw(port, alice_token, body, **headers)
        assert answer.status_code == 200, (body, answer.text)
        assert answer.json()["error"]["code"] == code, (body, answer.json())
    assert Run.objects.count() == before

    unauthenticated = raw(port, None, {**send, "params": {}}, **v1)
    assert unauthenticated.status_code == 401
    assert unauthenticated.json()["error"]["code"] == -32600
    assert Run.objects.count() == before


def test_a_context_of_someone_else_is_not_found(port, alice_token, bob_token):
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage"}
    hello = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Hello"}]}
    created = raw(
        port,
        alice_token,
        {**body, "params": {"message": hello, "configuration": {"returnImmediately": True}}},
        **{"A2A-Version": "1.0"},
    ).json()["result"]["task"]
    wait_for(lambda: Run.objects.get(run_id=created["id"]).status == Run.Status.COMPLETED)
    before = Run.objects.count()

    answer = raw(
        port,
        bob_token,
        {**body, "params": {"message": {**hello, "contextId": created["contextId"]}}},
        **{"A2A-Version": "1.0"},
    )

    assert answer.json()["error"]["code"] == -32001
    assert Run.objects.count() == before
