"""The Responses API as the unmodified ``openai`` Python SDK uses it, over real HTTP against
daphne, with a real RQ worker running the stages (the demo model, or a loopback
OpenAI-compatible model server for tool calls and slow answers).
docs/protocols/openai-responses.md."""

import json
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from agent_runs.models import Message, Run, Thread
from billing.models import UsageRecord
from tests.conftest import DEMO, fake_model_env, serving, wait_for
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


@pytest.fixture
def port(redis_queue: Any) -> Iterator[int]:
    """The demo model in every stage."""
    with serving(**DEMO) as port:
        yield port


@pytest.fixture
def model(redis_queue: Any) -> Iterator[FakeOpenAI]:
    """The worker's model on a loopback server the test steers (``model.port``)."""
    with FakeOpenAI() as fake:
        with serving(**fake_model_env(fake, router=False)) as port:
            fake.port = port  # type: ignore[attr-defined]  # the test's handle on the server
            yield fake
        fake.delay = 0


def sdk(port: int, token: str, **options: Any) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=f"http://127.0.0.1:{port}/openai/v1",
        api_key=token,
        **{"max_retries": 0, "timeout": 60, **options},
    )


def dumped(events: Any) -> list[dict[str, Any]]:
    return [event.model_dump(mode="json", exclude_unset=True, warnings=False) for event in events]


def brief(event: dict[str, Any]) -> tuple[Any, ...]:
    return event["sequence_number"], event["type"], event.get("delta"), event.get("item_id")


def assert_contiguous(events: list[dict[str, Any]]) -> None:
    assert [event["sequence_number"] for event in events] == list(range(len(events)))


def test_create_answers_a_completed_response_with_output_text(port, alice_token):
    client = sdk(port, alice_token)

    response = client.responses.create(
        model="gpt-test", input="Hello", instructions="Be brief.", metadata={"k": "v"}
    )

    assert response.id.startswith("resp_")
    assert response.status == "completed", response
    assert response.output_text
    assert response.model == "gpt-test" and response.metadata == {"k": "v"}
    assert response.instructions == "Be brief."
    assert response.usage is not None and response.usage.total_tokens >= 0
    run = Run.objects.get(run_id=response.id)
    assert run.status == Run.Status.COMPLETED
    assert run.request["model"] == "gpt-test"
    assert client.responses.retrieve(response.id).output_text == response.output_text


def test_create_with_stream_sends_the_sdk_s_event_sequence(port, alice_token):
    client = sdk(port, alice_token)

    events = dumped(client.responses.create(model="gpt-test", input="Hello", stream=True))

    assert_contiguous(events)
    kinds = [event["type"] for event in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    assert "response.output_item.added" in kinds and "response.output_text.delta" in kinds
    assert kinds.index("response.output_item.added") < kinds.index("response.output_text.delta")
    text = "".join(e["delta"] for e in events if e["type"] == "response.output_text.delta")
    final = events[-1]["response"]
    assert final["output"][-1]["content"][0]["text"] == text
    assert len({event.get("response", {}).get("id", final["id"]) for event in events}) == 1

    # A GET stream replays what the live stream sent, event for event.
    replayed = dumped(client.responses.retrieve(final["id"], stream=True))
    assert replayed == events


def test_the_stream_helper_gives_the_final_response(port, alice_token):
    client = sdk(port, alice_token)

    with client.responses.stream(model="gpt-test", input="Hello") as stream:
        texts = [event.delta for event in stream if event.type == "response.output_text.delta"]
        final = stream.get_final_response()

    assert final.status == "completed"
    assert final.output_text == "".join(texts)


def test_a_background_response_is_queued_then_retrieved_until_done(port, alice_token):
    client = sdk(port, alice_token)

    response = client.responses.create(model="gpt-test", input="Hello", background=True)

    assert response.status in ("queued", "in_progress")
    assert response.background is True
    while response.status in ("queued", "in_progress"):
        response = client.responses.retrieve(response.id)
    assert response.status == "completed"
    assert response.output_text


def test_a_dropped_stream_resumes_with_starting_after(port, alice_token):
    client = sdk(port, alice_token)

    stream = client.responses.create(model="gpt-test", input="Hello", stream=True, background=True)
    head = []
    for event in stream:
        head.append(event.model_dump(mode="json", exclude_unset=True))
        if len(head) == 3:
            break
    stream.close()  # dropped: the run goes on
    response_id = head[0]["response"]["id"]
    last = head[-1]["sequence_number"]

    tail = dumped(client.responses.retrieve(response_id, stream=True, starting_after=last))

    assert tail[0]["sequence_number"] == last + 1
    whole = head + tail
    assert_contiguous(whole)
    assert whole[-1]["type"] == "response.completed"
    # The helper asks for the whole stream and drops what it had: the same events.
    with client.responses.stream(response_id=response_id, starting_after=last) as resumed:
        # (the helper adds fields of its own: ``snapshot``, ``parsed``)
        assert [brief(event) for event in dumped(resumed)] == [brief(event) for event in tail]
        assert resumed.get_final_response().status == "completed"


def test_cancel_stops_the_run_and_a_second_cancel_returns_the_final_object(model, alice_token):
    model.delay = 30  # the run stays in its model call
    client = sdk(model.port, alice_token)
    response = client.responses.create(model="gpt-test", input="Hello", background=True)
    wait_for(lambda: Run.objects.get(run_id=response.id).status == Run.Status.RUNNING)

    cancelled = client.responses.cancel(response.id)
    again = client.responses.cancel(response.id)

    assert cancelled.status == "cancelled"
    assert again.model_dump() == cancelled.model_dump()
    assert Run.objects.get(run_id=response.id).status == Run.Status.CANCELLED
    events = dumped(client.responses.retrieve(response.id, stream=True))
    assert events[-1]["type"] == "response.incomplete"
    assert events[-1]["response"]["status"] == "cancelled"


def test_a_busy_conversation_is_a_conflict_the_sdk_does_not_retry(model, alice_token):
    model.delay = 30
    client = sdk(model.port, alice_token, max_retries=2)
    first = client.responses.create(
        model="gpt-test", input="Hello", background=True, conversation="trip"
    )
    wait_for(lambda: Run.objects.get(run_id=first.id).status == Run.Status.RUNNING)

    with pytest.raises(openai.ConflictError) as refused:
        client.responses.create(model="gpt-test", input="Again", conversation="trip")

    assert refused.value.response.headers["x-should-retry"] == "false"
    assert refused.value.code == "conversation_locked"
    assert refused.value.response.request.headers.get("x-stainless-retry-count") == "0"
    with pytest.raises(openai.ConflictError):
        client.responses.create(model="gpt-test", input="Again", previous_response_id=first.id)
    assert Run.objects.count() == 1
    client.responses.cancel(first.id)


def test_the_agent_s_tools_are_mcp_call_items(model, alice_token):
    model.tool_call_turns = [[("call_1", "calendar_list", json.dumps({}))]]
    client = sdk(model.port, alice_token)

    events = dumped(client.responses.create(model="gpt-test", input="My day?", stream=True))

    assert_contiguous(events)
    final = events[-1]["response"]
    assert events[-1]["type"] == "response.completed", events[-1]
    call = final["output"][0]
    assert call["type"] == "mcp_call"
    assert call["name"] == "calendar_list" and call["server_label"] == "agent"
    assert call["status"] in ("completed", "failed")
    assert not any(item["type"] == "function_call" for item in final["output"])
    assert any(event["type"] == "response.mcp_call_arguments.done" for event in events)
    # The usage is the run's recorded usage, and a replay sends what the live stream sent.
    records = UsageRecord.objects.filter(run__run_id=final["id"])
    assert records.exists()
    assert final["usage"]["input_tokens"] == sum(r.input_tokens or 0 for r in records)
    assert final["usage"]["output_tokens"] == sum(r.output_tokens or 0 for r in records)
    client = sdk(model.port, alice_token)
    assert dumped(client.responses.retrieve(final["id"], stream=True)) == events
    assert client.responses.retrieve(final["id"]).model_dump(mode="json") == (
        openai.types.responses.Response.model_validate(final).model_dump(mode="json")
    )


def test_a_previous_response_id_chain_of_three_turns_keeps_one_thread(port, alice_token):
    client = sdk(port, alice_token)

    first = client.responses.create(model="gpt-test", input="One")
    second = client.responses.create(model="gpt-test", input="Two", previous_response_id=first.id)
    third = client.responses.create(model="gpt-test", input="Three", previous_response_id=second.id)

    assert third.status == "completed" and third.previous_response_id == second.id
    runs = Run.objects.filter(run_id__in=[first.id, second.id, third.id])
    assert len({run.thread_id for run in runs}) == 1
    said = Message.objects.filter(role="user").order_by("created_at", "pk")
    assert [message.content for message in said] == ["One", "Two", "Three"]
    # Not the latest response of its conversation: a fork, refused.
    with pytest.raises(openai.BadRequestError) as fork:
        client.responses.create(model="gpt-test", input="Fork", previous_response_id=first.id)
    assert fork.value.code == "previous_response_not_latest"
    assert fork.value.param == "previous_response_id"


def test_a_conversation_names_one_thread_of_the_caller_s(port, alice_token):
    client = sdk(port, alice_token)

    first = client.responses.create(model="gpt-test", input="One", conversation="trip")
    second = client.responses.create(model="gpt-test", input="Two", conversation={"id": "trip"})

    assert first.conversation is not None and first.conversation.id == "trip"
    threads = {run.thread_id for run in Run.objects.filter(run_id__in=[first.id, second.id])}
    assert len(threads) == 1


def test_a_conversation_naming_a_stranger_s_thread_is_a_404(port, alice_token, bob_token):
    first = sdk(port, alice_token).responses.create(model="gpt-test", input="One")
    thread_id = str(Run.objects.get(run_id=first.id).thread_id)

    with pytest.raises(openai.NotFoundError) as refused:
        sdk(port, bob_token).responses.create(model="gpt-test", input="Hi", conversation=thread_id)

    assert refused.value.param == "conversation"
    assert Run.objects.count() == 1


def test_a_stranger_gets_404s(port, alice_token, bob_token):
    response = sdk(port, alice_token).responses.create(model="gpt-test", input="Hello")
    bob = sdk(port, bob_token)

    with pytest.raises(openai.NotFoundError) as read:
        bob.responses.retrieve(response.id)
    with pytest.raises(openai.NotFoundError):
        bob.responses.retrieve(response.id, stream=True)
    with pytest.raises(openai.NotFoundError):
        bob.responses.cancel(response.id)
    with pytest.raises(openai.NotFoundError):
        bob.responses.create(model="gpt-test", input="Hi", previous_response_id=response.id)
    assert read.value.body == {
        "message": f"Response with id '{response.id}' not found.",
        "type": "invalid_request_error",
        "param": None,
        "code": "not_found",
    }
    assert Run.objects.count() == 1


def test_no_credentials_is_a_401_in_openai_s_shape(port):
    with pytest.raises(openai.AuthenticationError) as refused:
        sdk(port, "not-a-token").responses.retrieve("resp_x")
    body = refused.value.body
    assert isinstance(body, dict) and body["type"] == "authentication_error"


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        (b"{not json", 400, None),
        (b"[1, 2]", 400, None),
        (b'{"model": "m"}', 400, "input"),
        (b'{"input": 7}', 400, "input"),
        (b'{"input": "   "}', 400, "input"),
        (b'{"input": "hi", "stream": "yes"}', 400, "stream"),
        (b'{"input": "hi", "metadata": {"k": 1}}', 400, "metadata.k"),
        (b'{"input": "hi", "tools": [{"type": "function", "name": "f"}]}', 400, "tools"),
        (b'{"input": "hi", "conversation": "c", "previous_response_id": "resp_1"}', 400, None),
        (b'{"input": [{"role": "assistant", "content": "hi"}]}', 400, None),
        (b'{"input": "hi", "previous_response_id": "resp_nope"}', 404, "previous_response_id"),
        (b'{"input": "hi\\u0000"}', 400, None),
    ],
)
def test_a_malformed_body_is_a_4xx_in_openai_s_shape_and_stores_nothing(
    port, alice_token, body, status, param
):
    answer = httpx.post(
        f"http://127.0.0.1:{port}/openai/v1/responses",
        content=body,
        headers={"Authorization": f"Bearer {alice_token}", "Content-Type": "application/json"},
    )

    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert set(error) == {"message", "type", "param", "code"}
    assert error["type"] == "invalid_request_error" and error["message"]
    if param is not None:
        assert error["param"] == param
    assert not Run.objects.exists() and not Thread.objects.exists()


def test_a_body_that_is_not_json_is_a_415(port, alice_token):
    answer = httpx.post(
        f"http://127.0.0.1:{port}/openai/v1/responses",
        content=b"input=hi",
        headers={
            "Authorization": f"Bearer {alice_token}",
            "Content-Type": "application/x-www-form-urlencoded",
        },
    )
    assert answer.status_code == 415
    assert answer.json()["error"]["type"] == "invalid_request_error"


def test_a_response_cancelled_before_it_starts_never_runs(daphne_port, alice_token, redis_queue):
    client = sdk(daphne_port, alice_token)  # no worker: the run stays queued
    response = client.responses.create(model="gpt-test", input="Hello", background=True)
    assert response.status == "queued"

    cancelled = client.responses.cancel(response.id)

    assert cancelled.status == "cancelled" and cancelled.output == []
    events = dumped(client.responses.retrieve(response.id, stream=True))
    assert [event["type"] for event in events] == [
        "response.created",
        "response.in_progress",
        "response.incomplete",
    ]
    assert events[-1]["response"]["status"] == "cancelled"
    assert Run.objects.get(run_id=response.id).started_at is None
