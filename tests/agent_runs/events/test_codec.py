"""The AG-UI codec (agent_runs/events/codec.py) and its SSE frame: pure, no database."""

import json

import pytest
from ag_ui.core import (
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StepFinishedEvent,
    StepStartedEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
)

from agent_runs.api.sse import sse_frame
from agent_runs.events import codec
from agent_runs.events.codec import EventOrderError, EventSequence, encode_event

IDS = {"threadId": "t-1", "runId": "r-1"}


def test_the_codec_removes_internal_statistics_and_keeps_spec_nulls():
    event = TextMessageEndEvent(
        message_id="m", answer="hi", error=None, inputTokens=3, outputTokens=4, cost="0.1",
        latencyMs=9, model="demo", totalTokens=7, **IDS,
    )  # fmt: skip
    payload = encode_event(event)
    assert payload == {
        "type": "TEXT_MESSAGE_END", "messageId": "m", "answer": "hi", "error": None,
        "totalTokens": 7, **IDS,
    }  # fmt: skip
    assert encode_event(RunErrorEvent(message="boom", code=None, **IDS))["code"] is None


@pytest.mark.parametrize(
    "fields",
    [
        {"message_id": "m", "delta": "hi"},
        {"messageId": "m", "delta": 'é \U0001f600 "q" \\ \n', **IDS},
        {"delta": "x", "message_id": "m", "runId": "r-1", "threadId": "t-1", "stage": "worker"},
        {"message_id": "m", "delta": "x", "model": "demo", "cost": "0.1", **IDS},  # internal
        {"message_id": "m", "delta": "x", "timestamp": 1700000000000, **IDS},
        {"message_id": "m", "delta": "x", "raw_event": {"a": [1, None]}, **IDS},
        {"message_id": "m", "delta": "x", "metadata": None, **IDS},
        {"message_id": "m", "delta": "x", "threadId": None, "runId": "r-1"},
        {"message_id": "m", "delta": "x", "outputTokens": 4, "totalTokens": 7, **IDS},
        {"type": "TEXT_MESSAGE_CONTENT", "message_id": "m", "delta": "x", **IDS},
    ],
)
def test_a_text_message_content_event_encodes_as_pydantic_serialises_it(fields):
    """Its wire JSON is built without pydantic's serialiser, and is the same text."""
    event = TextMessageContentEvent(**fields)
    expected = codec._serialised_payload(event)
    assert json.dumps(encode_event(event)) == json.dumps(expected)
    assert "model" not in expected and "cost" not in expected


def test_a_token_event_as_the_mapping_makes_it_is_encoded_without_pydantic():
    event = TextMessageContentEvent(message_id="m", delta="hi", **IDS)
    assert codec._plain_payload(event) == {
        "type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "hi", **IDS,
    }  # fmt: skip
    assert codec._plain_payload(TextMessageContentEvent(message_id="m", delta="x", n=1)) is None


def test_an_sse_frame_names_the_event_by_its_type():
    frame = sse_frame(42, {"type": "RUN_STARTED", **IDS})
    assert frame == (
        b"id: 42\nevent: RUN_STARTED\n"
        b'data: {"type":"RUN_STARTED","threadId":"t-1","runId":"r-1"}\n\n'
    )


def check_all(*events):
    sequence = EventSequence()
    for event in events:
        sequence.check(encode_event(event))
    return sequence


def test_a_well_ordered_run_passes_the_ordering_rules():
    sequence = check_all(
        RunStartedEvent(thread_id="t-1", run_id="r-1"),
        StepStartedEvent(step_name="worker"),
        TextMessageStartEvent(message_id="m", role="assistant"),
        TextMessageContentEvent(message_id="m", delta="hi"),
        TextMessageEndEvent(message_id="m"),
        StepFinishedEvent(step_name="worker"),
        RunFinishedEvent(thread_id="t-1", run_id="r-1"),
    )
    assert sequence.ended


@pytest.mark.parametrize(
    ("events", "problem"),
    [
        ([StepStartedEvent(step_name="worker")], "before RUN_STARTED"),
        (
            [RunStartedEvent(thread_id="t", run_id="r"), StepFinishedEvent(step_name="worker")],
            "not open",
        ),
        (
            [
                RunStartedEvent(thread_id="t", run_id="r"),
                TextMessageStartEvent(message_id="m", role="assistant"),
                RunFinishedEvent(thread_id="t", run_id="r"),
            ],
            "still open",
        ),
        (
            [
                RunStartedEvent(thread_id="t", run_id="r"),
                RunErrorEvent(message="x"),
                StepStartedEvent(step_name="worker"),
            ],
            "after the run's terminal event",
        ),
        (
            [
                RunStartedEvent(thread_id="t", run_id="r"),
                StepStartedEvent(step_name="worker"),
                StepStartedEvent(step_name="worker"),
            ],
            "started twice",
        ),
    ],
)
def test_an_ordering_violation_is_refused(events, problem):
    with pytest.raises(EventOrderError, match=problem):
        check_all(*events)


def test_run_error_may_end_a_run_with_things_still_open():
    sequence = check_all(
        RunStartedEvent(thread_id="t", run_id="r"),
        StepStartedEvent(step_name="worker"),
        RunErrorEvent(message="x"),
    )
    assert sequence.ended


def test_a_reasoning_delta_is_a_plain_token_event():
    event = ReasoningMessageContentEvent(message_id="r", delta="hmm", **IDS)
    assert codec._plain_payload(event) == {
        "type": "REASONING_MESSAGE_CONTENT", "messageId": "r", "delta": "hmm", **IDS,
    }  # fmt: skip
    assert json.dumps(encode_event(event)) == json.dumps(codec._serialised_payload(event))


@pytest.mark.parametrize(
    ("events", "problem"),
    [
        (
            [ReasoningMessageContentEvent(message_id="r", delta="x")],
            "reasoning message 'r' is not open",
        ),
        (
            [ReasoningStartEvent(message_id="r"), RunFinishedEvent(thread_id="t", run_id="r")],
            "still open",
        ),
        (
            [
                ReasoningStartEvent(message_id="r"),
                ReasoningMessageStartEvent(message_id="r", role="reasoning"),
                ReasoningEndEvent(message_id="r"),
                RunFinishedEvent(thread_id="t", run_id="r"),
            ],
            "still open",
        ),
        ([ReasoningEndEvent(message_id="r")], "reasoning 'r' is not open"),
    ],
)
def test_a_reasoning_event_out_of_order_is_refused(events, problem):
    with pytest.raises(EventOrderError, match=problem):
        check_all(RunStartedEvent(thread_id="t", run_id="r"), *events)
