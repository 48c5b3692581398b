"""Approvals as the unmodified ``openai`` SDK sees and answers them, over real HTTP against
daphne and a real worker whose model is the loopback server: a response that stops on an
approval ends ``incomplete`` with an ``mcp_approval_request`` item; a new response whose
input is an ``mcp_approval_response`` (``previous_response_id`` set) goes on, approved or
rejected, streamed and in the background; a stranger gets 404s; a wrong or late answer is
the SDK's own exception. docs/protocols/openai-responses.md, Approvals."""

import json
import time
from datetime import timedelta
from typing import Any

import openai
import pytest
from django.utils import timezone
from openai.types.responses import (
    ResponseIncompleteEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
)
from openai.types.responses.response_output_item import McpApprovalRequest, McpCall

from agent_runs.models import CalendarEvent, Interrupt, Run
from tests.agent_runs.protocols.openai_responses.test_openai_sdk import (
    assert_contiguous,
    dumped,
    model,
    sdk,
)
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

__all__ = ["model"]  # the fixture: a worker whose model is the loopback server

STANDUP = {"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "UTC"}
ASK = "Put a standup in my calendar tomorrow at nine"


def calendar_call(fake: FakeOpenAI) -> None:
    fake.tool_call_turns = [[("call_c1", "calendar_create", json.dumps(STANDUP))]]
    fake.answer = ["Done."]


def answer_item(request_id: str, approve: bool) -> dict[str, Any]:
    """The SDK's ``McpApprovalResponse`` input item."""
    item: dict[str, Any] = {
        "type": "mcp_approval_response",
        "approval_request_id": request_id,
        "approve": approve,
    }
    return item if approve else {**item, "reason": "not now"}


def polled(client: openai.OpenAI, response: Any) -> Any:
    deadline = time.monotonic() + 60
    while response.status in ("queued", "in_progress"):
        assert time.monotonic() < deadline, response
        time.sleep(0.1)
        response = client.responses.retrieve(response.id)
    return response


def tool_results_sent(fake: FakeOpenAI) -> list[str]:
    return [
        str(message.get("content"))
        for request in fake.requests
        for message in request["body"].get("messages", [])
        if message.get("role") == "tool"
    ]


def assert_went_on(fake: FakeOpenAI, call: McpCall, request_id: str, approve: bool) -> None:
    """The held call ran (approved) or was declined, as the answer said."""
    assert call.type == "mcp_call" and call.approval_request_id == request_id
    assert call.name == "calendar_create" and json.loads(call.arguments) == STANDUP
    titles = list(CalendarEvent.objects.values_list("title", flat=True))
    (result,) = tool_results_sent(fake)
    if approve:
        assert call.status == "completed" and titles == ["Standup"]
        assert "created" in result.lower()
    else:
        assert call.status == "failed" and titles == []
        assert call.error is not None and "not now" in str(call.error)
        assert "denied" in result.lower()
    assert Interrupt.objects.get(pk=request_id).status == Interrupt.Status.RESOLVED


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "rejected"])
def test_a_streamed_response_asks_and_a_streamed_response_answers(model, alice_token, approve):
    calendar_call(model)
    client = sdk(model.port, alice_token)

    stream = list(client.responses.create(model="gpt-test", input=ASK, stream=True))

    # Typed by the SDK as its own classes, none the fallback.
    events = dumped(stream)
    assert_contiguous(events)
    assert isinstance(stream[-1], ResponseIncompleteEvent)
    held = stream[-1].response
    assert held.status == "incomplete" and held.incomplete_details is not None
    assert held.incomplete_details.reason is None
    request = held.output[-1]
    assert isinstance(request, McpApprovalRequest)
    assert request.server_label == "agent" and request.name == "calendar_create"
    assert json.loads(request.arguments) == STANDUP
    assert Interrupt.objects.get(pk=request.id).status == Interrupt.Status.PENDING
    announced = [
        event
        for event in stream
        if isinstance(event, ResponseOutputItemAddedEvent | ResponseOutputItemDoneEvent)
        and isinstance(event.item, McpApprovalRequest)
    ]
    assert [event.type for event in announced] == [
        "response.output_item.added",
        "response.output_item.done",
    ]
    assert not CalendarEvent.objects.exists()
    # A replay of the held response sends what the live stream sent.
    assert dumped(client.responses.retrieve(held.id, stream=True)) == events

    with client.responses.stream(
        model="gpt-test",
        previous_response_id=held.id,
        input=[answer_item(request.id, approve)],  # type: ignore[list-item]  # the SDK's TypedDict
    ) as answering:
        answered = dumped(answering)
        final = answering.get_final_response()

    assert final.status == "completed" and final.previous_response_id == held.id
    assert final.output_text == "Done."
    call = final.output[0]
    assert isinstance(call, McpCall)
    assert_went_on(model, call, request.id, approve)
    kinds = [event["type"] for event in answered]
    assert kinds.index("response.output_item.added") < kinds.index("response.output_text.delta")
    assert Run.objects.get(run_id=final.id).continues.run_id == held.id  # type: ignore[union-attr]


@pytest.mark.parametrize("approve", [True, False], ids=["approved", "rejected"])
def test_a_background_response_asks_and_a_background_response_answers(model, alice_token, approve):
    calendar_call(model)
    client = sdk(model.port, alice_token)

    held = polled(client, client.responses.create(model="gpt-test", input=ASK, background=True))

    assert held.status == "incomplete" and held.background is True
    (request,) = [item for item in held.output if isinstance(item, McpApprovalRequest)]
    assert request.name == "calendar_create"

    answer = client.responses.create(
        model="gpt-test",
        previous_response_id=held.id,
        input=[answer_item(request.id, approve)],  # type: ignore[list-item]  # the SDK's TypedDict
        background=True,
    )

    assert answer.status in ("queued", "in_progress") and answer.previous_response_id == held.id
    final = polled(client, answer)
    assert final.status == "completed" and final.output_text == "Done."
    call = final.output[0]
    assert isinstance(call, McpCall)
    assert_went_on(model, call, request.id, approve)
    # The held response stays as it was asked.
    assert client.responses.retrieve(held.id).status == "incomplete"


def test_strangers_get_404s_and_wrong_or_late_answers_are_the_sdk_s_errors(
    model, alice_token, bob_token
):
    calendar_call(model)
    client = sdk(model.port, alice_token, max_retries=2)
    held = polled(client, client.responses.create(model="gpt-test", input=ASK, background=True))
    request = held.output[-1]
    assert isinstance(request, McpApprovalRequest)
    bob = sdk(model.port, bob_token)

    with pytest.raises(openai.NotFoundError):
        bob.responses.retrieve(held.id)
    with pytest.raises(openai.NotFoundError) as stranger:
        bob.responses.create(
            model="gpt-test",
            previous_response_id=held.id,
            input=[answer_item(request.id, True)],  # type: ignore[list-item]  # a TypedDict
        )
    assert stranger.value.param == "previous_response_id"
    with pytest.raises(openai.BadRequestError) as unknown:
        client.responses.create(
            model="gpt-test",
            previous_response_id=held.id,
            input=[answer_item("int-unknown", True)],  # type: ignore[list-item]  # a TypedDict
        )
    assert unknown.value.param == "input[0].approval_request_id"
    with pytest.raises(openai.ConflictError) as pending:
        client.responses.create(model="gpt-test", input="Never mind", previous_response_id=held.id)
    assert pending.value.code == "approval_pending"
    assert pending.value.response.request.headers.get("x-stainless-retry-count") == "0"
    assert Run.objects.count() == 1
    # Late: expired, a 410 the SDK does not retry; nothing written.
    Interrupt.objects.filter(pk=request.id).update(expires_at=timezone.now() - timedelta(seconds=1))
    with pytest.raises(openai.APIStatusError) as late:
        client.responses.create(
            model="gpt-test",
            previous_response_id=held.id,
            input=[answer_item(request.id, True)],  # type: ignore[list-item]  # a TypedDict
        )
    assert late.value.status_code == 410 and late.value.code == "approval_request_expired"
    assert Run.objects.count() == 1 and not CalendarEvent.objects.exists()


def test_a_plain_create_answers_the_incomplete_response_and_a_plain_answer_the_reply(
    model, alice_token
):
    calendar_call(model)
    client = sdk(model.port, alice_token)

    held = client.responses.create(model="gpt-test", input=ASK)

    assert held.status == "incomplete", held
    requests = [item for item in held.output if item.type == "mcp_approval_request"]
    assert [request.name for request in requests] == ["calendar_create"]
    answer = client.responses.create(
        model="gpt-test",
        previous_response_id=held.id,
        input=[answer_item(request.id, True) for request in requests],  # type: ignore[misc]  # a TypedDict
    )
    assert answer.status == "completed" and answer.output_text == "Done."
    assert [item.type for item in answer.output] == ["mcp_call", "message"]
    assert list(CalendarEvent.objects.values_list("title", flat=True)) == ["Standup"]
