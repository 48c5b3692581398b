"""The Agent API over real HTTP against daphne, with runs executed by a real worker process:
the streams of a text run, a tool run, a failure and a cancel; the final object of
``stream: false``; a session over two requests; resume by ``Last-Event-ID``; access."""

import http.client
import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from agent_runs.models import Message, Run, RunEvent
from agent_runs.selectors.runs import session_thread_id
from billing.models import UsageRecord
from tests.conftest import post_run, run_input, start_worker, stop_process, wait_for
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

PROCESS = "/api/v1/agent/process"


class Answer:
    """An HTTP answer: its status, headers, and its SSE objects or JSON body."""

    def __init__(self, status: int, headers: dict[str, str], body: bytes) -> None:
        self.status = status
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)

    @property
    def frames(self) -> list[tuple[str, dict[str, Any]]]:
        """The stream's events as (id, data); comments and ``retry:`` left out."""
        frames = []
        for block in self.body.decode().split("\n\n"):
            fields = dict(
                line.split(": ", 1)
                for line in block.split("\n")
                if line.startswith(("id:", "data:"))
            )
            if "data" in fields:
                frames.append((fields["id"], json.loads(fields["data"])))
        return frames

    @property
    def objects(self) -> list[dict[str, Any]]:
        return [data for _id, data in self.frames]


def call(
    port: int,
    method: str,
    path: str,
    body: Any = None,
    *,
    token: str,
    headers: dict[str, str] | None = None,
    raw: bytes | None = None,
    stop_when: Any = None,
    timeout: float = 30,
) -> Answer:
    """One request; a stream is read to its end (or until ``stop_when`` holds of an object,
    then the connection is closed)."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    sent = {"Authorization": f"Bearer {token}", **(headers or {})}
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    if data is not None:
        sent.setdefault("Content-Type", "application/json")
    connection.request(method, path, body=data, headers=sent)
    response = connection.getresponse()
    answer = Answer(response.status, dict(response.getheaders()), b"")
    if stop_when is None:
        answer.body = response.read()
    else:
        while line := response.readline():
            answer.body += line
            if line.startswith(b"data: ") and stop_when(json.loads(line[6:])):
                break
    connection.close()
    return answer


def agent_request(text: str = "hello", **fields: Any) -> dict[str, Any]:
    """An AgentRequest as agentscope clients send it."""
    message = {"role": "user", "type": "message", "content": [{"type": "text", "text": text}]}
    return {"input": [message], **fields}


def brief(obj: dict[str, Any]) -> str:
    """An object as ``object:status`` (``content:in_progress``, ``message:completed``…)."""
    kind = obj["object"]
    if kind == "message" and obj["type"] != "message":
        kind = obj["type"]
    return f"{kind}:{obj['status']}"


def collapse(briefs: list[str]) -> list[str]:
    collapsed: list[str] = []
    for item in briefs:
        if not (collapsed and item == collapsed[-1] == "content:in_progress"):
            collapsed.append(item)
    return collapsed


def assert_numbered(answer: Answer) -> None:
    """Sequence numbers contiguous from 0, each the SSE id of its frame."""
    frames = answer.frames
    assert [int(frame_id) for frame_id, _ in frames] == list(range(len(frames)))
    assert all(int(frame_id) == data["sequence_number"] for frame_id, data in frames)


@pytest.fixture
def worker(redis_queue: Any) -> Iterator[None]:
    """A real worker process on the demo model."""
    process = start_worker()
    yield
    stop_process(process)


def model_worker(model: FakeOpenAI) -> Any:
    return start_worker(
        AGENT_WORKER_MODEL="openai/gpt-test",
        OPENAI_BASE_URL=model.base_url,
        OPENAI_API_KEY="sk-test",
        AGENT_MODEL_MAX_RETRIES="1",
        AGENT_MODEL_RETRY_DELAY_SECONDS="0",
    )


@pytest.fixture
def model(redis_queue: Any) -> Iterator[FakeOpenAI]:
    """A real worker whose model is a loopback OpenAI-compatible server."""
    with FakeOpenAI() as fake:
        process = model_worker(fake)
        try:
            yield fake
        finally:
            fake.delay = 0
            stop_process(process)


def test_a_text_run_streams_the_specs_objects_in_order_and_replays_byte_for_byte(
    alice_token, daphne_port, worker
):
    answer = call(daphne_port, "POST", PROCESS, agent_request(session_id="s1"), token=alice_token)

    assert answer.status == 200, answer.body
    assert answer.headers["Content-Type"] == "text/event-stream"
    assert_numbered(answer)
    objects = answer.objects
    assert collapse([brief(obj) for obj in objects]) == [
        "response:created",
        "response:in_progress",
        "message:in_progress",
        "content:in_progress",
        "content:completed",
        "message:completed",
        "response:completed",
    ]
    response_id = objects[0]["id"]
    assert response_id.startswith("response_") and uuid.UUID(response_id.removeprefix("response_"))
    assert {obj["id"] for obj in objects if obj["object"] == "response"} == {response_id}
    assert all(obj["session_id"] == "s1" for obj in objects if obj["object"] == "response")
    message = objects[2]
    assert (message["role"], message["type"], message["content"]) == ("assistant", "message", None)
    deltas = [obj for obj in objects if brief(obj) == "content:in_progress"]
    assert all(
        (d["index"], d["delta"], d["msg_id"], d["type"]) == (0, True, message["id"], "text")
        for d in deltas
    )
    text = "".join(d["text"] for d in deltas)
    run = Run.objects.get(run_id=response_id)
    assert text == Message.objects.get(run=run, role="assistant").content
    whole = objects[-3]
    assert (whole["text"], whole["delta"], whole["msg_id"]) == (text, False, message["id"])
    final = objects[-1]
    assert final["output"] == [{k: v for k, v in objects[-2].items() if k != "sequence_number"}]
    assert final["usage"] == {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}  # demo
    assert final["error"] is None
    assert final["created_at"] == int(run.created_at.timestamp())
    assert run.finished_at is not None
    assert final["completed_at"] == int(run.finished_at.timestamp())

    # The replay is what the live stream sent, byte for byte; GET answers the final object.
    replay = call(daphne_port, "GET", f"{PROCESS}/{response_id}?stream=true", token=alice_token)
    assert replay.status == 200
    assert replay.frames == answer.frames
    assert replay.body.replace(b": keep-alive\n\n", b"") == answer.body.replace(
        b": keep-alive\n\n", b""
    )
    got = call(daphne_port, "GET", f"{PROCESS}/{response_id}", token=alice_token)
    assert (got.status, got.json()) == (200, final)


def test_a_tool_run_streams_function_call_and_function_call_output_messages_with_usage(
    alice_token, daphne_port, model
):
    model.tool_call_turns = [[("call_1", "calendar_list", "{}")]]

    answer = call(daphne_port, "POST", PROCESS, agent_request("my day?"), token=alice_token)

    assert answer.status == 200, answer.body
    assert_numbered(answer)
    objects = answer.objects
    assert collapse([brief(obj) for obj in objects]) == [
        "response:created",
        "response:in_progress",
        "function_call:in_progress",
        "content:completed",
        "function_call:completed",
        "function_call_output:in_progress",
        "content:completed",
        "function_call_output:completed",
        "message:in_progress",
        "content:in_progress",
        "content:completed",
        "message:completed",
        "response:completed",
    ]
    call_message, output_message = objects[4], objects[7]
    assert call_message["role"] == "assistant" and output_message["role"] == "tool"
    assert call_message["content"][0]["data"] == {
        "call_id": "call_1",
        "name": "calendar_list",
        "arguments": "{}",
    }
    output = output_message["content"][0]["data"]
    assert (output["call_id"], output["name"]) == ("call_1", "calendar_list")
    assert json.loads(output["output"])["count"] == 0
    final = objects[-1]
    assert [m["type"] for m in final["output"]] == [
        "function_call",
        "function_call_output",
        "message",
    ]
    assert final["output"][-1]["content"][0]["text"] == "Hello from the fake model."
    records = UsageRecord.objects.filter(run__run_id=final["id"])
    assert final["usage"]["input_tokens"] == sum(r.input_tokens or 0 for r in records) > 0
    assert final["usage"]["output_tokens"] == sum(r.output_tokens or 0 for r in records) > 0
    assert final["usage"]["total_tokens"] == sum(r.total_tokens or 0 for r in records)


def test_a_failure_ends_the_stream_failed_with_the_specs_error(alice_token, daphne_port, model):
    model.status = 500

    answer = call(daphne_port, "POST", PROCESS, agent_request(), token=alice_token)

    assert answer.status == 200, answer.body
    assert_numbered(answer)
    assert [brief(obj) for obj in answer.objects] == [
        "response:created",
        "response:in_progress",
        "response:failed",
    ]
    final = answer.objects[-1]
    assert final["error"] == {"code": "model_error", "message": "runtime execution failed"}
    assert final["output"] == [] and final["completed_at"] is not None
    assert Run.objects.get(run_id=final["id"]).status == Run.Status.FAILED


def test_a_cancel_ends_the_stream_canceled_and_a_second_cancel_answers_the_same(
    alice_token, daphne_port, model
):
    model.delay = 30  # the run stays in its first model call
    started = call(
        daphne_port,
        "POST",
        PROCESS,
        agent_request(),
        token=alice_token,
        stop_when=lambda obj: obj["status"] == "in_progress",
    )
    response_id = started.objects[0]["id"]
    wait_for(lambda: model.requests)

    cancelled = call(daphne_port, "POST", f"{PROCESS}/{response_id}/cancel", token=alice_token)
    again = call(daphne_port, "POST", f"{PROCESS}/{response_id}/cancel", token=alice_token)

    assert cancelled.status == again.status == 200, cancelled.body
    final = cancelled.json()
    assert (final["status"], final["error"], final["output"]) == ("canceled", None, [])
    assert final["sequence_number"] == 2 and final["id"] == response_id
    assert again.json() == final
    stream = call(daphne_port, "GET", f"{PROCESS}/{response_id}?stream=true", token=alice_token)
    assert [brief(obj) for obj in stream.objects] == [
        "response:created",
        "response:in_progress",
        "response:canceled",
    ]
    assert stream.objects[-1] == final
    run = Run.objects.get(run_id=response_id)
    assert run.status == Run.Status.CANCELLED
    assert RunEvent.objects.filter(run=run).order_by("-seq")[0].payload["code"] == "cancelled"


def test_a_response_cancelled_while_queued_behind_another_answers_its_final_object_at_once(
    alice_token, daphne_port, model
):
    model.delay = 30  # the session's first run stays in its model call
    session = {"session_id": "busy"}
    first = call(
        daphne_port,
        "POST",
        PROCESS,
        agent_request(**session),
        token=alice_token,
        stop_when=lambda obj: obj["status"] == "created",
    ).objects[0]["id"]
    second = call(
        daphne_port,
        "POST",
        PROCESS,
        agent_request("and then?", **session),
        token=alice_token,
        stop_when=lambda obj: obj["status"] == "created",
    ).objects[0]["id"]
    wait_for(lambda: model.requests)

    cancelled = call(daphne_port, "POST", f"{PROCESS}/{second}/cancel", token=alice_token)

    assert cancelled.status == 200
    final = cancelled.json()
    assert (final["status"], final["sequence_number"], final["id"]) == ("canceled", 2, second)
    assert not RunEvent.objects.filter(run__run_id=second).exists()  # its turn has not come
    call(daphne_port, "POST", f"{PROCESS}/{first}/cancel", token=alice_token)
    stream = call(daphne_port, "GET", f"{PROCESS}/{second}?stream=true", token=alice_token)
    assert stream.objects[-1] == final  # what its journal gave when its turn came


def test_stream_false_answers_the_final_response_object(alice_token, daphne_port, worker):
    answer = call(
        daphne_port,
        "POST",
        PROCESS,
        agent_request(stream=False, model="qwen-max"),
        token=alice_token,
    )

    assert answer.status == 200, answer.body
    assert answer.headers["Content-Type"] == "application/json"
    final = answer.json()
    assert (final["object"], final["status"], final["model"]) == (
        "response",
        "completed",
        "qwen-max",
    )
    assert final["output"][0]["content"][0]["text"].startswith("(demo model)")
    replay = call(daphne_port, "GET", f"{PROCESS}/{final['id']}?stream=true", token=alice_token)
    assert replay.objects[-1] == final
    assert Run.objects.get(run_id=final["id"]).request == {
        "protocol": "agent_api",
        "session_id": final["session_id"],
        "kept": {"model": "qwen-max"},
    }


def test_a_session_is_continued_over_two_requests(alice, alice_token, daphne_port, worker):
    first = call(
        daphne_port, "POST", PROCESS, agent_request("one", session_id="chat-1"), token=alice_token
    )
    second = call(
        daphne_port,
        "POST",
        PROCESS,
        agent_request("two", session_id="chat-1", stream=False),
        token=alice_token,
    )

    assert first.status == second.status == 200
    one, two = first.objects[-1], second.json()
    assert one["session_id"] == two["session_id"] == "chat-1" and one["id"] != two["id"]
    runs = Run.objects.filter(run_id__in=[one["id"], two["id"]]).order_by("pk")
    thread_ids = {run.thread_id for run in runs}
    user = runs[0].thread.owner
    assert thread_ids == {session_thread_id(user=user, session="chat-1")}
    texts = Message.objects.filter(thread_id__in=thread_ids, role="user").values_list(
        "content", flat=True
    )
    assert list(texts) == ["one", "two"]
    # The thread is the caller's own: AG-UI reads the same conversation.
    (thread_id,) = thread_ids
    assert alice.get(f"/api/v1/agent/threads/{thread_id}").status_code == 200


def test_a_stream_resumes_after_last_event_id(alice_token, daphne_port, worker):
    whole = call(daphne_port, "POST", PROCESS, agent_request(), token=alice_token)
    response_id = whole.objects[0]["id"]

    resumed = call(
        daphne_port,
        "GET",
        f"{PROCESS}/{response_id}?stream=true",
        token=alice_token,
        headers={"Last-Event-ID": "3"},
    )

    assert resumed.status == 200
    assert resumed.frames == whole.frames[4:]
    bad = call(
        daphne_port,
        "GET",
        f"{PROCESS}/{response_id}?stream=true",
        token=alice_token,
        headers={"Last-Event-ID": "three"},
    )
    assert (bad.status, bad.json()) == (
        400,
        {
            "error": {
                "code": "invalid_request",
                "message": "Last-Event-ID must be a sequence_number (an integer from 0)",
            }
        },
    )


def test_a_stream_dropped_mid_run_resumes_live_to_its_end(alice_token, daphne_port, model):
    model.delay = 1  # each model call takes a second: the resume comes mid-run
    first = call(
        daphne_port,
        "POST",
        PROCESS,
        agent_request(),
        token=alice_token,
        stop_when=lambda obj: obj["status"] == "in_progress",
    )
    response_id = first.objects[0]["id"]
    last = first.frames[-1][0]

    rest = call(
        daphne_port,
        "GET",
        f"{PROCESS}/{response_id}?stream=true",
        token=alice_token,
        headers={"Last-Event-ID": last},
    )

    assert rest.frames[0][0] == str(int(last) + 1)
    assert rest.objects[-1]["status"] == "completed"
    whole = call(daphne_port, "GET", f"{PROCESS}/{response_id}?stream=true", token=alice_token)
    assert first.frames + rest.frames == whole.frames


def test_a_strangers_session_and_responses_are_not_found(
    alice_token, bob_token, daphne_port, redis_queue
):
    session = str(uuid.uuid4())
    mine = call(
        daphne_port,
        "POST",
        PROCESS,
        agent_request(session_id=session, stream=True),
        token=alice_token,
        stop_when=lambda obj: True,
    )
    response_id = mine.objects[0]["id"]

    taken = call(daphne_port, "POST", PROCESS, agent_request(session_id=session), token=bob_token)
    read = call(daphne_port, "GET", f"{PROCESS}/{response_id}", token=bob_token)
    streamed = call(daphne_port, "GET", f"{PROCESS}/{response_id}?stream=true", token=bob_token)
    cancelled = call(daphne_port, "POST", f"{PROCESS}/{response_id}/cancel", token=bob_token)

    assert (taken.status, taken.json()) == (
        404,
        {"error": {"code": "not_found", "message": "session not found"}},
    )
    not_found = {"error": {"code": "not_found", "message": "response not found"}}
    for answer in (read, streamed, cancelled):
        assert (answer.status, answer.json()) == (404, not_found)
    assert Run.objects.count() == 1
    assert Run.objects.get().status == Run.Status.QUEUED  # bob's cancel did nothing


def test_a_run_another_protocol_started_is_a_response_of_its_thread(
    alice, alice_token, daphne_port, redis_queue
):
    body = run_input()
    assert post_run(alice, body).status_code == 202  # AG-UI's POST /runs, queued

    got = call(daphne_port, "GET", f"{PROCESS}/{body['runId']}", token=alice_token)
    cancelled = call(daphne_port, "POST", f"{PROCESS}/{body['runId']}/cancel", token=alice_token)

    assert got.status == 200
    assert got.json() == {
        "sequence_number": 0,
        "object": "response",
        "status": "created",
        "id": body["runId"],
        "created_at": got.json()["created_at"],
        "completed_at": None,
        "error": None,
        "output": None,
        "usage": None,
        "session_id": body["threadId"],
    }
    final = cancelled.json()
    assert (final["status"], final["sequence_number"], final["session_id"]) == (
        "canceled",
        2,
        body["threadId"],
    )


def _message(content: Any, **fields: Any) -> dict[str, Any]:
    return {"input": [{"role": "user", "type": "message", "content": content, **fields}]}


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        (b"{not json", 400, "malformed JSON: Expecting property name enclosed in double quotes"),
        (b"", 400, "invalid AgentRequest: input: Field required"),
        (b"[1]", 400, "the body must be a JSON object (an AgentRequest)"),
        ({}, 400, "invalid AgentRequest: input: Field required"),
        (
            {"input": []},
            400,
            "invalid AgentRequest: input: List should have at least 1 item after validation, not 0",
        ),
        (
            _message([{"type": "text", "text": "hi"}], role="assistant"),
            400,
            "invalid AgentRequest: input.0.role: Input should be 'user'",
        ),
        (
            _message([{"type": "audio", "data": "..."}]),
            400,
            "invalid AgentRequest: input.0.content.0.type: Input should be 'text' or 'image'",
        ),
        (
            _message([{"type": "text", "text": "  "}]),
            400,
            "invalid AgentRequest: input.0.content: the message is empty",
        ),
        (
            _message([{"type": "text", "text": "x" * 10_001}]),
            400,
            "invalid AgentRequest: input.0.content.0.text: String should have at most 10000 "
            "characters",
        ),
        (
            {**agent_request(), "stream": "yes"},
            400,
            "invalid AgentRequest: stream: Input should be a valid boolean",
        ),
        (
            {**agent_request(), "n": 2},
            400,
            "invalid AgentRequest: n: Input should be less than or equal to 1",
        ),
        (
            {**agent_request(), "session_id": ""},
            400,
            "invalid AgentRequest: session_id: String should have at least 1 character",
        ),
        (
            _message([{"type": "image"}]),
            400,
            "invalid AgentRequest: input.0.content.0.image_url: required for image content",
        ),
        (
            _message([{"type": "image", "image_url": "https://example.com/cat.png"}]),
            422,
            "binary content url is not a valid signed URL: signed URL path must start with "
            "/storage/v1/object/sign/",
        ),
    ],
    ids=[
        "not json",
        "empty",
        "not an object",
        "no input",
        "empty input",
        "not a user message",
        "unknown content",
        "blank text",
        "text too long",
        "stream not a boolean",
        "several answers",
        "empty session",
        "image without its URL",
        "image not a signed URL",
    ],
)
def test_a_malformed_body_is_a_4xx_in_the_protocols_shape_and_stores_nothing(
    alice_token, daphne_port, body, status, message
):
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()

    answer = call(
        daphne_port,
        "POST",
        PROCESS,
        raw=raw,
        token=alice_token,
        headers={"Accept": "text/event-stream"},
    )

    assert answer.status == status, answer.body
    assert answer.headers["Content-Type"] == "application/json"
    error = answer.json()["error"]
    assert set(error) == {"code", "message"}
    assert error["message"].startswith(message), error
    assert not Run.objects.exists() and not Message.objects.exists()


def test_an_image_reaches_the_run_as_the_callers_stored_object(alice, alice_image_url):
    body = _message([{"type": "text", "text": "What is this?"}, {"type": "image", "image_url": ""}])
    body["input"][0]["content"][1]["image_url"] = alice_image_url()

    response = alice.post(PROCESS, body, format="json")

    assert response.status_code == 200
    assert response["Content-Type"] == "text/event-stream"
    response.close()
    stored = Message.objects.get(role="user")
    text, image = stored.content_blocks
    assert text == {"type": "text", "text": "What is this?"}
    assert (image["type"], image["mimeType"], image["bucket"]) == (
        "binary",
        "image/png",
        "agent-inputs",
    )
    assert "url" not in image  # a signed URL is a credential: never stored


def test_a_body_that_is_not_json_and_a_caller_without_credentials_are_refused(
    alice_token, daphne_port
):
    form = call(
        daphne_port,
        "POST",
        PROCESS,
        raw=b"input=hi",
        token=alice_token,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    anonymous = call(daphne_port, "POST", PROCESS, agent_request(), token="not-a-token")

    assert (form.status, form.json()["error"]["code"]) == (415, "unsupported_media_type")
    assert (anonymous.status, anonymous.json()) == (
        401,
        {"error": {"code": "not_authenticated", "message": "Invalid token."}},
    )
    assert not Run.objects.exists()
