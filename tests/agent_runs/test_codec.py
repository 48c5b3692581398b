"""The AG-UI codec and the AgentScope mapping: pure, no database."""

import json
from random import Random
from typing import Any

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
from agentscope.event import (
    TextBlockDeltaEvent,
    ThinkingBlockDeltaEvent,
    ThinkingBlockEndEvent,
    ThinkingBlockStartEvent,
    ToolCallDeltaEvent,
    ToolCallEndEvent,
    ToolCallStartEvent,
    ToolResultEndEvent,
    ToolResultTextDeltaEvent,
)

from agent_runs.api.sse import sse_frame
from agent_runs.events import codec
from agent_runs.events.codec import EventOrderError, EventSequence, encode_event
from agent_runs.runtime.agentscope_events import (
    STRUCTURED_OUTPUT_TOOL,
    RunMappingState,
    StructuredAnswer,
    answer_text_events,
    map_agentscope_event,
    reasoning_texts,
)
from agent_runs.services.messages import ReasoningText

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


def mapped(events, state):
    out: list[dict[str, Any]] = []
    for event in events:
        out.extend(encode_event(e) for e in map_agentscope_event(event, state))
    return out


def structured_output_events(call_id, pieces):
    return [
        ToolCallStartEvent(
            reply_id="x", tool_call_id=call_id, tool_call_name=STRUCTURED_OUTPUT_TOOL
        ),
        *(ToolCallDeltaEvent(reply_id="x", tool_call_id=call_id, delta=p) for p in pieces),
        ToolCallEndEvent(reply_id="x", tool_call_id=call_id),
        ToolResultEndEvent(reply_id="x", tool_call_id=call_id, state="success"),
    ]


def test_the_structured_answer_streams_as_one_text_message_and_its_tool_stays_internal():
    state = RunMappingState(thread_id="t-1", run_id="r-1", stage="worker", message_id="m")
    pieces = ['{"answer": "Hel', 'lo \\"you\\"', " \\u00e9\\u", '00e9", "status": "success"}']
    payloads = mapped(structured_output_events("c9", pieces), state)

    assert [p["type"] for p in payloads] == ["TEXT_MESSAGE_START"] + ["TEXT_MESSAGE_CONTENT"] * 4
    assert "".join(p["delta"] for p in payloads[1:]) == 'Hello "you" éé'
    assert state.text == 'Hello "you" éé'
    assert payloads[0]["messageId"] == "m" and payloads[0]["role"] == "assistant"
    assert state.tool_names == {}  # never a backend tool event or a stored tool message


def test_text_the_model_writes_beside_its_structured_output_is_not_sent():
    state = RunMappingState(thread_id="t-1", run_id="r-1", stage="worker", message_id="m")
    narration = [TextBlockDeltaEvent(reply_id="x", block_id="b", delta="Let me look.")]
    assert mapped(narration, state) == []
    assert state.narration == "Let me look."
    # Once the answer is known, what was not streamed of it is sent.
    payloads = mapped_answer("All done.", state)
    assert [p["type"] for p in payloads] == ["TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT"]
    assert payloads[1]["delta"] == "All done." and state.text == "All done."


@pytest.mark.parametrize(
    "raw, expected",
    [
        ('{"answer": "ab', "ab"),
        ('{"answer": "a\\', "a"),  # an escape not complete yet
        ('{"answer": "a\\u00', "a"),
        ('{"answer": "\\ud83d', ""),  # half of a surrogate pair
        ('{"answer": "\\ud83d\\ude00!", "x": 1}', "\U0001f600!"),
        ('{"key_points": ["answer"], "answer":"done"}', "done"),
        ('{"ui_hints": {"answer": "nested"}, "answer": "top"}', "top"),
        ('{"status": "success"', ""),
    ],
)
@pytest.mark.parametrize("piece_size", [1, 3, 1000])
def test_the_answer_is_decoded_as_far_as_it_has_arrived(raw, expected, piece_size):
    answer = StructuredAnswer()
    added = [answer.feed(raw[i : i + piece_size]) for i in range(0, len(raw), piece_size)]
    assert "".join(added) == answer.text == expected


def test_each_character_of_the_arguments_is_looked_at_once():
    """However the arguments are cut, the work is linear in their length (rescanning what
    has arrived at every piece made a long answer quadratic)."""
    looked_at = []

    class Counting(StructuredAnswer):
        def _answer_run(self, piece, position, added):
            after = super()._answer_run(piece, position, added)
            looked_at.append(piece[position:after])
            return after

        def _structure_char(self, char):
            looked_at.append(char)
            super()._structure_char(char)

    raw = '{"key_points": ["x"], "answer": "' + "ab\\n" * 2_000 + '"}'
    answer = Counting()
    for i in range(0, len(raw), 4):
        answer.feed(raw[i : i + 4])
    assert answer.text == "ab\n" * 2_000
    assert "".join(looked_at) == raw[:-1]  # all but the closing brace, after the answer


@pytest.mark.parametrize("seed", range(20))
def test_the_streamed_answer_is_the_answer_json_decodes_however_it_is_cut(seed):
    random = Random(seed)
    alphabet = ["a", " ", "é", "\U0001f600", '"', "\\", "\n", "\t", "/", "\u2028", "\x01"]
    text = "".join(random.choice(alphabet) for _ in range(random.randint(0, 60)))
    other = {"key_points": [text[:5], "answer"], "ui_hints": {"answer": text[::-1]}}
    document = {**dict(random.sample(sorted(other.items()), random.randint(0, 2))), "answer": text}
    raw = json.dumps({**document, "status": "success"}, ensure_ascii=random.random() < 0.5)
    answer, added, position = StructuredAnswer(), [], 0
    while position < len(raw):
        size = random.randint(1, 7)
        added.append(answer.feed(raw[position : position + size]))
        position += size
    assert "".join(added) == answer.text == text


def mapped_answer(answer, state):
    return [encode_event(event) for event in answer_text_events(answer, state)]


def test_a_tool_call_maps_to_start_args_end_and_result_with_the_spec_fields():
    state = RunMappingState(thread_id="t-1", run_id="r-1", stage="worker", message_id="m")
    payloads = mapped(
        [
            ToolCallStartEvent(reply_id="x", tool_call_id="c1", tool_call_name="calendar_write"),
            ToolCallDeltaEvent(reply_id="x", tool_call_id="c1", delta='{"title": '),
            ToolCallDeltaEvent(reply_id="x", tool_call_id="c1", delta='"Standup"}'),
            ToolCallEndEvent(reply_id="x", tool_call_id="c1"),
            ToolResultTextDeltaEvent(reply_id="x", tool_call_id="c1", delta='{"id": 7}'),
            ToolResultEndEvent(reply_id="x", tool_call_id="c1", state="success"),
        ],
        state,
    )
    kinds = [p["type"] for p in payloads]
    assert kinds == ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT"]
    start, args, end, result = payloads
    assert start["toolCallId"] == "c1" and start["toolCallName"] == "calendar_write"
    assert start["stage"] == "worker" and start["messageId"] == "m"
    assert args["args"] == {"title": "Standup"}
    assert end["toolCallId"] == "c1"
    assert result["tool_call_id"] == "c1" and result["tool_name"] == "calendar_write"
    assert result["tool_call_args"] == {"title": "Standup"}
    assert result["status"] == "success" and result["result"] == '{"id": 7}'
    assert result["error"] is None and result["role"] == "tool"
    # The tool message's own id, never the id of the assistant message that made the call
    # (AG-UI clients would hold two messages under one id).
    assert result["messageId"] == "tool-c1" != start["messageId"]
    sequence = EventSequence()  # and the mapped events are well ordered

    sequence.check({"type": "RUN_STARTED"})
    for payload in payloads:
        sequence.check(payload)


def test_mapping_state_belongs_to_one_run():
    first = RunMappingState(thread_id="t", run_id="r1", stage="worker", message_id="m1")
    second = RunMappingState(thread_id="t", run_id="r2", stage="worker", message_id="m2")
    assert mapped(structured_output_events("c1", ['{"answer": "a']), first)[0]["runId"] == "r1"
    assert mapped(structured_output_events("c1", ['{"answer": "b']), second)[0]["runId"] == "r2"
    assert (first.text, second.text) == ("a", "b")


def thinking_events(block_id, pieces):
    return [
        ThinkingBlockStartEvent(reply_id="x", block_id=block_id),
        *(ThinkingBlockDeltaEvent(reply_id="x", block_id=block_id, delta=p) for p in pieces),
        ThinkingBlockEndEvent(reply_id="x", block_id=block_id),
    ]


def test_a_thinking_block_streams_as_a_reasoning_span_holding_one_reasoning_message():
    state = RunMappingState(thread_id="t-1", run_id="r-1", stage="worker", message_id="m")
    payloads = mapped(thinking_events("b1", ["Let me", "", " think."]), state)

    assert [p["type"] for p in payloads] == [
        "REASONING_START",
        "REASONING_MESSAGE_START",
        "REASONING_MESSAGE_CONTENT",
        "REASONING_MESSAGE_CONTENT",  # an empty delta is not sent
        "REASONING_MESSAGE_END",
        "REASONING_END",
    ]
    # One id, the stage's own and not AgentScope's random block id, on all of them.
    assert {p["messageId"] for p in payloads} == {"reasoning-m-1"}
    assert payloads[0] == {"type": "REASONING_START", "messageId": "reasoning-m-1",
                           "stage": "worker", **IDS}  # fmt: skip
    assert payloads[1]["role"] == "reasoning" and payloads[1]["stage"] == "worker"
    assert payloads[2] == {"type": "REASONING_MESSAGE_CONTENT", "messageId": "reasoning-m-1",
                           "delta": "Let me", **IDS}  # fmt: skip
    sequence = EventSequence()
    sequence.check({"type": "RUN_STARTED"})
    for payload in payloads:
        sequence.check(payload)
    assert not sequence.open_reasoning and not sequence.open_reasoning_messages
    assert reasoning_texts(state) == [
        ReasoningText(message_id="reasoning-m-1", text="Let me think.")
    ]


def test_each_model_call_s_thinking_is_a_reasoning_message_of_its_own():
    state = RunMappingState(thread_id="t-1", run_id="r-1", stage="worker", message_id="m")
    mapped([*thinking_events("b1", ["First."]), *thinking_events("b2", ["Then."])], state)

    assert reasoning_texts(state) == [
        ReasoningText(message_id="reasoning-m-1", text="First."),
        ReasoningText(message_id="reasoning-m-2", text="Then."),
    ]


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
