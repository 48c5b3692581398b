"""Validation of ``POST /api/v1/agent/runs`` (docs/spec/run-agent-input.md, Validation Rules,
forwardedProps.client_time Validation, forwardedProps Schema, Compatibility Notes).

Every rejected request must answer ``{"detail": "<spec message>"}`` and write nothing: no
thread, no message, no run, and no job on the Redis queue.
"""

import json
import uuid
from typing import Any

import django_rq
import pytest
from django.conf import settings
from rest_framework.test import APIClient

from agent_runs.models import Message, Run, Thread
from agent_runs.protocols.agui.inbound import MAX_PAYLOAD_BYTES
from tests.conftest import post_run, run_input, send

pytestmark = pytest.mark.django_db

URL = "/api/v1/agent/runs"
IMAGE_URL = "https://storage.example.com/sign/bucket/a.png?token=x"
VALID_CLIENT_TIME = {
    "device_timezone": "America/Los_Angeles",
    "client_now_iso": "2026-03-16T09:12:33-07:00",
    "client_epoch_ms": 1773658353000,
}


# Builders ---------------------------------------------------------------------------------


def user_message(content: Any = "What is on my calendar?", id: str = "msg-001") -> dict[str, Any]:
    return {"id": id, "role": "user", "content": content}


def assistant_message(content: str = "Sure.", id: str = "msg-000") -> dict[str, Any]:
    return {"id": id, "role": "assistant", "content": content}


def text_block(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def image_block(**overrides: Any) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "binary", "mimeType": "image/png", "url": IMAGE_URL}
    block.update(overrides)
    return block


def with_client_time(**overrides: Any) -> dict[str, Any]:
    """A RunAgentInput whose forwardedProps.client_time is the valid one, with overrides."""
    client_time = {**VALID_CLIENT_TIME, **overrides}
    return run_input(forwardedProps={"runtime_mode": "chat", "client_time": client_time})


def body_of_exactly(size: int, padding_char: str = "x") -> bytes:
    """A valid RunAgentInput (9,000 chars of user text) padded through ``state`` until its
    UTF-8 encoding is exactly ``size`` bytes."""
    body = run_input(messages=[user_message("a" * 9_000)], state={"padding": ""})
    unpadded = len(json.dumps(body, ensure_ascii=False).encode())
    char_bytes = len(padding_char.encode())
    count, remainder = divmod(size - unpadded, char_bytes)
    body["state"]["padding"] = padding_char * count + "x" * remainder
    raw = json.dumps(body, ensure_ascii=False).encode()
    assert len(raw) == size
    return raw


def post_raw(client: APIClient, raw: bytes, content_type: str = "application/json") -> Any:
    # The stub says str; Django's test client sends bytes as they are.
    data: Any = raw
    return send(lambda: client.generic("POST", URL, data=data, content_type=content_type))


# Assertions -------------------------------------------------------------------------------


def assert_nothing_written(redis_queue: Any) -> None:
    assert Thread.objects.count() == 0
    assert Message.objects.count() == 0
    assert Run.objects.count() == 0
    assert redis_queue.count == 0


def assert_rejected(response: Any, status_code: int, detail: str, redis_queue: Any) -> None:
    assert response.status_code == status_code, response.content
    assert response.json() == {"detail": detail}
    assert_nothing_written(redis_queue)


def assert_accepted(response: Any) -> Run:
    assert response.status_code == 202, response.content
    assert response.json()["taskId"] in django_rq.get_queue(settings.AGENT_RUNS_QUEUE).job_ids
    return Run.objects.get(run_id=response.json()["runId"])


# payload ≤ 256KB --------------------------------------------------------------------------


def test_it_rejects_a_payload_one_byte_over_256_kb(alice, redis_queue):
    response = post_raw(alice, body_of_exactly(MAX_PAYLOAD_BYTES + 1))
    assert_rejected(response, 413, "RunAgentInput payload exceeds size limit", redis_queue)


def test_it_rejects_a_payload_over_256_kb_sent_as_a_json_string(alice, redis_queue):
    body = json.dumps(run_input(state={"padding": "x" * MAX_PAYLOAD_BYTES}))
    response = alice.post(URL, data=body, content_type="application/json")
    assert_rejected(response, 413, "RunAgentInput payload exceeds size limit", redis_queue)


def test_it_measures_the_payload_in_bytes_not_characters(alice, redis_queue):
    raw = body_of_exactly(MAX_PAYLOAD_BYTES + 2, padding_char="中")
    assert len(raw.decode()) < MAX_PAYLOAD_BYTES
    response = post_raw(alice, raw)
    assert_rejected(response, 413, "RunAgentInput payload exceeds size limit", redis_queue)


def test_it_accepts_a_payload_of_exactly_256_kb(alice, redis_queue):
    response = post_raw(alice, body_of_exactly(MAX_PAYLOAD_BYTES))
    run = assert_accepted(response)
    assert Message.objects.get(run=run).content == "a" * 9_000


# threadId ---------------------------------------------------------------------------------


def test_it_rejects_a_thread_id_that_is_not_a_uuid(alice, redis_queue):
    response = post_run(alice, run_input(threadId="thread-1"))
    assert_rejected(response, 422, "threadId must be a valid UUID", redis_queue)


def test_it_rejects_a_missing_thread_id(alice, redis_queue):
    body = run_input()
    del body["threadId"]
    response = post_run(alice, body)
    assert_rejected(response, 422, "threadId must be a valid UUID", redis_queue)


# runId ------------------------------------------------------------------------------------


def test_it_rejects_a_run_id_of_129_characters(alice, redis_queue):
    response = post_run(alice, run_input(runId="r" * 129))
    assert_rejected(response, 422, "runId exceeds length limit", redis_queue)


def test_it_accepts_a_run_id_of_exactly_128_characters(alice, redis_queue):
    run = assert_accepted(post_run(alice, run_input(runId="r" * 128)))
    assert run.run_id == "r" * 128


# messages ≤ 200 ---------------------------------------------------------------------------


def test_it_rejects_201_messages(alice, redis_queue):
    messages = [user_message()] + [assistant_message(id=f"msg-a{i}") for i in range(200)]
    response = post_run(alice, run_input(messages=messages))
    assert_rejected(response, 422, "RunAgentInput.messages exceeds limit", redis_queue)


# user text ≤ 10,000 characters ------------------------------------------------------------


def test_it_rejects_user_text_of_10001_characters(alice, redis_queue):
    response = post_run(alice, run_input(messages=[user_message("a" * 10_001)]))
    assert_rejected(response, 422, "RunAgentInput user message text exceeds limit", redis_queue)


def test_it_rejects_text_blocks_whose_joined_text_exceeds_10000_characters(alice, redis_queue):
    content = [text_block("a" * 5_000), text_block("b" * 5_001)]
    response = post_run(alice, run_input(messages=[user_message(content)]))
    assert_rejected(response, 422, "RunAgentInput user message text exceeds limit", redis_queue)


def test_it_accepts_user_text_of_exactly_10000_characters(alice, redis_queue):
    run = assert_accepted(post_run(alice, run_input(messages=[user_message("a" * 10_000)])))
    assert Message.objects.get(run=run).content == "a" * 10_000


# forwardedProps ---------------------------------------------------------------------------


RUNTIME_MODE_REQUIRED = 'runtime_mode is required ("chat" or "automation")'


@pytest.mark.parametrize(
    ("forwarded_props", "hint"),
    [
        pytest.param({}, RUNTIME_MODE_REQUIRED, id="runtime_mode-missing"),
        pytest.param(None, RUNTIME_MODE_REQUIRED, id="forwardedProps-missing"),
        pytest.param(
            {"runtime_mode": "batch"},
            'runtime_mode must be "chat" or "automation"',
            id="runtime_mode-batch",
        ),
        pytest.param(
            {"runtime_mode": "chat", "foo": 1},
            'unexpected field "foo": only runtime_mode and client_time are allowed',
            id="extra-key",
        ),
        pytest.param(
            "chat",
            'must be an object such as {"runtime_mode": "chat"} (or "automation")',
            id="not-an-object",
        ),
        pytest.param(
            {"runtime_mode": "chat", "client_time": "now"},
            "client_time must be an object with device_timezone, client_now_iso and "
            "client_epoch_ms",
            id="client_time-not-an-object",
        ),
    ],
)
def test_it_rejects_invalid_forwarded_props_with_the_spec_s_message_and_a_hint(
    alice, redis_queue, forwarded_props, hint
):
    body = run_input(forwardedProps=forwarded_props)
    if forwarded_props is None:
        del body["forwardedProps"]
    response = post_run(alice, body)
    # The spec's message (Validation Rules), then what is expected.
    assert_rejected(response, 422, f"invalid RunAgentInput.forwardedProps: {hint}", redis_queue)


# exactly one user message, first ----------------------------------------------------------


def test_it_rejects_two_user_messages(alice, redis_queue):
    messages = [user_message(id="msg-001"), user_message("And tomorrow?", id="msg-002")]
    response = post_run(alice, run_input(messages=messages))
    assert_rejected(
        response, 422, "RunAgentInput.messages must contain exactly one user message", redis_queue
    )


def test_it_rejects_messages_without_a_user_message(alice, redis_queue):
    response = post_run(alice, run_input(messages=[assistant_message()]))
    assert_rejected(
        response, 422, "RunAgentInput.messages must contain exactly one user message", redis_queue
    )


def test_it_rejects_a_first_message_that_is_not_the_user_message(alice, redis_queue):
    response = post_run(alice, run_input(messages=[assistant_message(), user_message()]))
    assert_rejected(response, 422, "RunAgentInput.messages[0].role must be user", redis_queue)


# binary content ---------------------------------------------------------------------------


def test_it_rejects_a_binary_block_that_is_not_an_image(alice, redis_queue):
    content = [text_block("Read this"), image_block(mimeType="application/pdf")]
    response = post_run(alice, run_input(messages=[user_message(content)]))
    assert_rejected(response, 422, "binary content requires image mimeType", redis_queue)


def test_it_rejects_a_binary_block_without_url(alice, redis_queue):
    block = image_block()
    del block["url"]
    response = post_run(alice, run_input(messages=[user_message([text_block("Look"), block])]))
    assert_rejected(response, 422, "binary content requires url", redis_queue)


def test_it_rejects_a_binary_block_with_data(alice, redis_queue):
    content = [text_block("Look"), image_block(data="iVBORw0KGgo=")]
    response = post_run(alice, run_input(messages=[user_message(content)]))
    assert_rejected(response, 422, "binary content data is not allowed", redis_queue)


def test_it_rejects_four_attachments_in_one_message(alice, redis_queue):
    content = [text_block("Compare these"), *[image_block() for _ in range(4)]]
    response = post_run(alice, run_input(messages=[user_message(content)]))
    assert_rejected(response, 422, "Too many attachments", redis_queue)


def test_it_accepts_three_attachments_in_one_message(alice, redis_queue, alice_image_url):
    images = [
        {"type": "binary", "mimeType": "image/png", "url": alice_image_url()} for _ in range(3)
    ]
    content = [text_block("Compare these"), *images]
    run = assert_accepted(post_run(alice, run_input(messages=[user_message(content)])))
    stored = Message.objects.get(run=run).content_blocks
    assert stored[0] == content[0]
    # Each image is kept as its storage place (bucket, path), not as its expiring URL.
    assert [set(block) for block in stored[1:]] == [{"type", "mimeType", "bucket", "path"}] * 3
    assert len({block["path"] for block in stored[1:]}) == 3


# forwardedProps.client_time ---------------------------------------------------------------


def test_it_rejects_a_client_time_with_an_unknown_timezone(alice, redis_queue):
    response = post_run(alice, with_client_time(device_timezone="Mars/Olympus"))
    assert_rejected(response, 422, "invalid client_time.device_timezone", redis_queue)


@pytest.mark.parametrize(
    "client_now_iso",
    [
        pytest.param("2026-03-16T09:12:33", id="no-offset"),
        pytest.param("not a date", id="not-a-date"),
    ],
)
def test_it_rejects_a_client_now_iso_that_is_not_rfc3339_with_an_offset(
    alice, redis_queue, client_now_iso
):
    response = post_run(alice, with_client_time(client_now_iso=client_now_iso))
    assert_rejected(response, 422, "invalid client_time.client_now_iso", redis_queue)


@pytest.mark.parametrize(
    "client_epoch_ms",
    [
        pytest.param(1773658353000.5, id="fraction"),
        pytest.param("1773658353000", id="string"),
    ],
)
def test_it_rejects_a_client_epoch_ms_that_is_not_an_integer(alice, redis_queue, client_epoch_ms):
    response = post_run(alice, with_client_time(client_epoch_ms=client_epoch_ms))
    assert_rejected(response, 422, "invalid client_time.client_epoch_ms", redis_queue)


def test_it_takes_a_client_epoch_ms_written_with_a_zero_fraction(alice, redis_queue):
    # JSON has one kind of number, and JSON Schema's integer is any whole one.
    response = post_run(alice, with_client_time(client_epoch_ms=1773658353000.0))
    assert response.status_code == 202, response.content
    run = Run.objects.get()
    assert run.input["forwardedProps"]["client_time"]["client_epoch_ms"] == 1773658353000


def test_it_accepts_a_valid_client_time_and_stores_it_on_the_run(alice, redis_queue):
    run = assert_accepted(post_run(alice, with_client_time()))
    assert run.client_time == VALID_CLIENT_TIME


# Compatibility: snake_case aliases --------------------------------------------------------


def test_it_accepts_snake_case_field_names_and_stores_a_camel_case_snapshot(
    alice, redis_queue, alice_image_url
):
    image_url = alice_image_url()
    body = {
        "thread_id": str(uuid.uuid4()),
        "run_id": "run-snake-case",
        "state": {},
        "messages": [
            user_message(
                [
                    text_block("What is in this picture?"),
                    {"type": "binary", "mime_type": "image/png", "url": image_url},
                ]
            )
        ],
        "tools": [],
        "context": [],
        "forwarded_props": {"runtime_mode": "chat"},
    }
    run = assert_accepted(post_run(alice, body))
    snapshot = run.input
    assert snapshot["threadId"] == body["thread_id"]
    assert snapshot["runId"] == body["run_id"]
    assert snapshot["forwardedProps"] == {"runtime_mode": "chat"}
    assert not {"thread_id", "run_id", "forwarded_props"} & set(snapshot)
    binary = snapshot["messages"][0]["content"][1]
    # The signed URL (a credential) is not kept: the image is named by its storage place.
    assert set(binary) == {"type", "mimeType", "bucket", "path"}
    assert binary["mimeType"] == "image/png" and image_url not in json.dumps(snapshot)


# Malformed requests -----------------------------------------------------------------------


def test_it_rejects_malformed_json_with_400(alice, redis_queue):
    response = post_raw(alice, b'{"threadId": ')
    assert response.status_code == 400, response.content
    assert "JSON" in response.json()["detail"]
    assert_nothing_written(redis_queue)


def test_it_rejects_a_body_that_is_not_json_with_415(alice, redis_queue):
    response = post_raw(alice, json.dumps(run_input()).encode(), content_type="text/plain")
    assert response.status_code == 415, response.content
    assert "detail" in response.json()
    assert_nothing_written(redis_queue)


def test_it_rejects_a_json_list_body(alice, redis_queue):
    response = post_run(alice, [run_input()])
    assert response.status_code == 422, response.content
    assert response.json()["detail"].startswith("invalid RunAgentInput")
    assert_nothing_written(redis_queue)


# Authentication ---------------------------------------------------------------------------


def test_it_rejects_a_request_without_credentials(redis_queue):
    response = post_run(APIClient(), run_input())
    assert response.status_code == 401, response.content
    assert "detail" in response.json()
    assert_nothing_written(redis_queue)


def test_it_rejects_a_request_with_a_wrong_bearer_token(alice_token, redis_queue):
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Bearer wrong")
    response = post_run(client, run_input())
    assert response.status_code == 401, response.content
    assert "detail" in response.json()
    assert_nothing_written(redis_queue)


# What JSON, Python or PostgreSQL cannot carry ---------------------------------------------
# Each was a 500 before; now a 4xx that names the problem and writes nothing.


def test_it_rejects_a_nul_character_in_a_string_with_422_naming_its_place(alice, redis_queue):
    body = run_input(messages=[user_message("before\u0000after")])
    response = post_raw(alice, json.dumps(body).encode())
    assert_rejected(
        response,
        422,
        "invalid RunAgentInput.messages[0].content: strings must not contain NUL (\\u0000)",
        redis_queue,
    )


def test_it_rejects_a_nul_character_in_a_key_of_client_data(alice, redis_queue):
    body = run_input(state={"ok": [{"bad\u0000key": 1}]})
    response = post_raw(alice, json.dumps(body).encode())
    assert_rejected(
        response,
        422,
        "invalid RunAgentInput.state.ok[0]: keys must not contain NUL (\\u0000)",
        redis_queue,
    )


def test_it_holds_the_resume_it_ignores_to_the_same_rule(alice, redis_queue):
    # /runs answers no interrupt, but a body is storable JSON in every field (OpenAPI's
    # StorableJson), ignored or not.
    body = run_input(resume=[{"interruptId": "int-1", "status": "resolved", "payload": "\u0000"}])
    response = post_raw(alice, json.dumps(body).encode())
    assert_rejected(
        response,
        422,
        "invalid RunAgentInput.resume[0].payload: strings must not contain NUL (\\u0000)",
        redis_queue,
    )
    ignored = post_run(alice, run_input(resume=[{"interruptId": "int-1", "status": "resolved"}]))
    assert "resume" not in assert_accepted(ignored).input


@pytest.mark.parametrize(
    "escaped",
    [
        pytest.param("\\ud800", id="high"),
        pytest.param("\\udfff", id="low"),
        pytest.param("x\\ude00\\ud83d", id="reversed-pair"),
    ],
)
def test_it_rejects_a_lone_surrogate_in_a_string_with_422(alice, redis_queue, escaped):
    raw = json.dumps(run_input(runId="RUN")).replace('"RUN"', f'"{escaped}"').encode()
    response = post_raw(alice, raw)
    assert_rejected(
        response,
        422,
        "invalid RunAgentInput.runId: strings must not contain lone surrogates (\\ud800-\\udfff)",
        redis_queue,
    )


def test_it_rejects_a_lone_surrogate_sent_as_raw_utf8_bytes(alice, redis_queue):
    raw = json.dumps(run_input(state={"s": "RAW"})).encode().replace(b"RAW", b"\xed\xa0\x80")
    response = post_raw(alice, raw)
    assert response.status_code in (400, 422), response.content
    assert isinstance(response.json()["detail"], str)
    assert_nothing_written(redis_queue)


def test_it_accepts_a_surrogate_pair_escape_as_the_character_it_spells(alice, redis_queue):
    raw = json.dumps(run_input(state={"emoji": "EMOJI"})).replace("EMOJI", "\\ud83d\\ude00")
    run = assert_accepted(post_raw(alice, raw.encode()))
    assert run.input["state"] == {"emoji": "\U0001f600"}


def nested_list(depth: int) -> Any:
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_it_rejects_state_nested_300_deep_with_422(alice, redis_queue):
    response = post_raw(alice, json.dumps(run_input(state=nested_list(300))).encode())
    assert_rejected(
        response,
        422,
        "invalid RunAgentInput.state" + "[0]" * 63 + ": nested deeper than 64 levels",
        redis_queue,
    )


def test_it_accepts_a_body_nested_exactly_64_deep(alice, redis_queue):
    # The body object is level 1 and "state" level 2: 62 more lists inside it.
    run = assert_accepted(post_raw(alice, json.dumps(run_input(state=nested_list(63))).encode()))
    assert run.input["state"] == nested_list(63)


def test_it_rejects_a_body_nested_65_deep(alice, redis_queue):
    response = post_raw(alice, json.dumps(run_input(state=nested_list(64))).encode())
    assert response.status_code == 422, response.content
    assert response.json()["detail"].endswith(": nested deeper than 64 levels")
    assert_nothing_written(redis_queue)


@pytest.mark.parametrize("depth", [2_000, 100_000])
def test_it_rejects_json_nested_thousands_deep_with_422(alice, redis_queue, depth):
    raw = ('{"state": ' + "[" * depth + "]" * depth + "}").encode()
    response = post_raw(alice, raw)
    assert_rejected(
        response, 422, "invalid RunAgentInput: nested deeper than 64 levels", redis_queue
    )


@pytest.mark.parametrize(
    "place",
    [
        pytest.param("state", id="in-state"),
        pytest.param("client_epoch_ms", id="in-client-time"),
    ],
)
def test_it_rejects_a_5000_digit_integer_with_400(alice, redis_queue, place):
    body = with_client_time(client_epoch_ms="BIG") if place == "client_epoch_ms" else None
    body = body or run_input(state={"n": "BIG"})
    raw = json.dumps(body).replace('"BIG"', "9" * 5_000).encode()
    response = post_raw(alice, raw)
    assert_rejected(response, 400, "malformed JSON: an integer longer than 100 digits", redis_queue)


def test_it_accepts_an_integer_of_100_digits_in_client_data(alice, redis_queue):
    raw = json.dumps(run_input(state={"n": "BIG"})).replace('"BIG"', "-" + "9" * 100)
    run = assert_accepted(post_raw(alice, raw.encode()))
    assert run.input["state"] == {"n": -int("9" * 100)}


@pytest.mark.parametrize(
    ("number", "detail"),
    [
        pytest.param("NaN", "malformed JSON: NaN is not a JSON value", id="nan"),
        pytest.param("Infinity", "malformed JSON: Infinity is not a JSON value", id="inf"),
        pytest.param("-Infinity", "malformed JSON: -Infinity is not a JSON value", id="-inf"),
        pytest.param("1e400", "malformed JSON: a number out of range (1e400)", id="overflow"),
    ],
)
def test_it_rejects_numbers_json_cannot_carry_with_400(alice, redis_queue, number, detail):
    raw = json.dumps(run_input(state={"n": "NUMBER"})).replace('"NUMBER"', number).encode()
    assert_rejected(post_raw(alice, raw), 400, detail, redis_queue)


def test_it_rejects_a_parent_run_id_longer_than_a_run_id_with_422(alice, redis_queue):
    response = post_run(alice, run_input(parentRunId="p" * 129))
    assert_rejected(
        response, 422, "invalid RunAgentInput.parentRunId: exceeds length limit", redis_queue
    )


def test_the_spec_rules_come_before_what_postgresql_cannot_store(alice, redis_queue):
    # The spec's table is checked first, so its answers are the same as before.
    body = run_input(threadId="thread-1", state={"s": "nul\u0000", "deep": nested_list(100)})
    response = post_raw(alice, json.dumps(body).encode())
    assert_rejected(response, 422, "threadId must be a valid UUID", redis_queue)
