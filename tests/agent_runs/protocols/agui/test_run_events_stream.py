"""The SSE event stream over real HTTP against daphne, with runs through a real worker."""

import json
import threading
import time
from typing import Any

import pytest

from agent_runs.events.codec import INTERNAL_FIELDS
from agent_runs.events.emitter import stream_key
from agent_runs.models import Message, Run, RunEvent
from tests.agent_runs.sse import read_sse
from tests.conftest import post_run, run_input, work_burst

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

EXPECTED_TYPES = [
    "RUN_STARTED",
    "STEP_STARTED",  # router
    "STEP_FINISHED",
    "STEP_STARTED",  # worker
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "STEP_FINISHED",
    "STEP_STARTED",  # memory
    "STEP_FINISHED",
    "RUN_FINISHED",
]


def completed_run(alice, redis_queue, text="Hello there, agent"):
    body = run_input(messages=[{"id": "m1", "role": "user", "content": text}])
    post_run(alice, body)
    work_burst(redis_queue)
    return body


def collapse(types):
    """The type sequence with repeated TEXT_MESSAGE_CONTENT deltas counted once."""
    collapsed: list[str] = []
    for kind in types:
        if not (collapsed and kind == collapsed[-1] == "TEXT_MESSAGE_CONTENT"):
            collapsed.append(kind)
    return collapsed


def test_a_run_streams_its_full_event_sequence_in_order(
    alice, alice_token, redis_queue, daphne_port
):
    body = completed_run(alice, redis_queue)
    stream = read_sse(daphne_port, body["threadId"], token=alice_token)

    assert stream.status == 200
    assert stream.headers["Content-Type"].startswith("text/event-stream")
    assert stream.frames[0] == {"retry": "3000"}
    assert collapse(stream.types) == EXPECTED_TYPES
    ids = [int(frame["id"]) for frame in stream.events]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    assert ids == list(RunEvent.objects.order_by("pk").values_list("pk", flat=True))
    for frame in stream.events:
        data = frame["data"]
        assert frame["event"] == data["type"]
        assert data["threadId"] == body["threadId"] and data["runId"] == body["runId"]
        assert not INTERNAL_FIELDS & set(data)
    by_type = {frame["event"]: frame["data"] for frame in stream.events}
    steps = [frame["data"]["stepName"] for frame in stream.events if "stepName" in frame["data"]]
    assert steps == ["router", "router", "worker", "worker", "memory", "memory"]
    end = by_type["TEXT_MESSAGE_END"]
    answer = Message.objects.get(role="assistant").content
    deltas = "".join(
        f["data"]["delta"] for f in stream.events if f["event"] == "TEXT_MESSAGE_CONTENT"
    )
    assert end["answer"] == deltas == answer
    assert end["messageId"] == by_type["TEXT_MESSAGE_START"]["messageId"]
    assert end["role"] == "assistant" and end["stage"] == "worker"
    assert end["status"] == "success" and end["error"] is None
    assert {"key_points", "result_type", "suggested_actions", "ui_schema"} <= set(end)


def test_resuming_after_each_event_gives_exactly_the_rest(
    alice, alice_token, redis_queue, daphne_port
):
    body = completed_run(alice, redis_queue)
    full = read_sse(daphne_port, body["threadId"], token=alice_token).events
    ids = [frame["id"] for frame in full]
    for index, event_id in enumerate(ids):
        rest = read_sse(
            daphne_port, body["threadId"], token=alice_token, headers={"Last-Event-ID": event_id}
        )
        assert [frame["id"] for frame in rest.events] == ids[index + 1 :]
    by_query = read_sse(
        daphne_port, body["threadId"], token=alice_token, query={"lastEventId": ids[2]}
    )
    assert [frame["id"] for frame in by_query.events] == ids[3:]


def test_events_redis_no_longer_holds_come_from_postgresql(
    alice, alice_token, redis_queue, daphne_port
):
    body = completed_run(alice, redis_queue)
    full = read_sse(daphne_port, body["threadId"], token=alice_token).events

    redis_queue.connection.xtrim(stream_key(body["threadId"]), maxlen=0)
    trimmed = read_sse(daphne_port, body["threadId"], token=alice_token)
    redis_queue.connection.flushall()
    flushed = read_sse(
        daphne_port, body["threadId"], token=alice_token, headers={"Last-Event-ID": "0"}
    )

    assert trimmed.events == full
    assert flushed.events == full


def test_a_client_connected_before_the_run_gets_its_events_live(
    alice, alice_token, redis_queue, daphne_port
):
    body = run_input()
    post_run(alice, body)
    received: dict[str, Any] = {}

    def listen():
        received["stream"] = read_sse(daphne_port, body["threadId"], token=alice_token)

    listener = threading.Thread(target=listen)
    listener.start()
    time.sleep(0.5)  # the client is waiting on the live stream before the run starts
    work_burst(redis_queue)
    listener.join(timeout=15)

    assert not listener.is_alive()
    assert collapse(received["stream"].types) == EXPECTED_TYPES


def test_an_idle_followed_stream_sends_keep_alives(alice, alice_token, redis_queue, daphne_port):
    body = completed_run(alice, redis_queue)
    events = len(read_sse(daphne_port, body["threadId"], token=alice_token).events)
    stream = read_sse(
        daphne_port,
        body["threadId"],
        token=alice_token,
        query={"follow": "true"},
        max_frames=1 + events + 2,
    )
    assert len(stream.events) == events
    assert stream.frames[-2:] == [{"comment": "keep-alive"}, {"comment": "keep-alive"}]


def test_a_stranger_gets_404_and_no_credentials_get_401(alice, bob_token, redis_queue, daphne_port):
    body = run_input()
    post_run(alice, body)
    stranger = read_sse(daphne_port, body["threadId"], token=bob_token)
    anonymous = read_sse(daphne_port, body["threadId"])
    assert stranger.status == 404 and stranger.body == b'{"detail": "Not found."}'
    assert anonymous.status == 401 and b"detail" in anonymous.body


def test_a_browser_reads_the_stream_with_a_short_lived_stream_token(
    alice, bob, redis_queue, daphne_port
):
    body = completed_run(alice, redis_queue)
    issued = alice.post(f"/api/v1/agent/runs/{body['threadId']}/stream-token")
    assert issued.status_code == 201
    token = issued.json()["token"]

    stream = read_sse(daphne_port, body["threadId"], query={"token": token})
    other_thread = read_sse(daphne_port, run_input()["threadId"], query={"token": token})
    tampered = read_sse(daphne_port, body["threadId"], query={"token": token + "x"})

    assert collapse(stream.types) == EXPECTED_TYPES
    assert other_thread.status == 401
    assert tampered.status == 401
    assert bob.post(f"/api/v1/agent/runs/{body['threadId']}/stream-token").status_code == 404


def test_a_failing_run_ends_with_run_error_and_is_marked_failed(
    alice, alice_token, redis_queue, daphne_port
):
    body = run_input()
    post_run(alice, body)
    Message.objects.filter(run__run_id=body["runId"]).delete()  # the job cannot build a prompt
    work_burst(redis_queue)

    stream = read_sse(daphne_port, body["threadId"], token=alice_token)
    assert stream.types[0] == "RUN_STARTED"
    assert stream.types[-1] == "RUN_ERROR"
    assert "RUN_FINISHED" not in stream.types
    error = stream.events[-1]["data"]
    assert error["message"] == "runtime execution failed" and "code" in error
    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.FAILED and "DoesNotExist" in run.error


def test_a_browser_with_an_admin_session_reads_its_own_stream(
    alice, client, redis_queue, daphne_port
):
    from django.conf import settings
    from django.contrib.auth import get_user_model

    body = completed_run(alice, redis_queue)
    client.force_login(get_user_model().objects.get(username="alice"))
    cookie = f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"

    own = read_sse(daphne_port, body["threadId"], headers={"Cookie": cookie})
    forged = read_sse(daphne_port, body["threadId"], headers={"Cookie": "sessionid=forged"})

    assert collapse(own.types) == EXPECTED_TYPES
    assert forged.status == 401
    for malformed in ['sessionid="unclosed', "a b=c; ,;==; sessionid", "\x7f=\x7f; =;"]:
        answer = read_sse(daphne_port, body["threadId"], headers={"Cookie": malformed})
        assert answer.status == 401, (malformed, answer.body)  # no session, not a 500


def test_a_followed_stream_stays_open_for_the_threads_next_run(
    alice, alice_token, redis_queue, daphne_port
):
    first = completed_run(alice, redis_queue)
    second = run_input(threadId=first["threadId"], runId="run-next")
    received: dict[str, Any] = {}

    def second_run_finished(frame):
        data = frame.get("data", {})
        return data.get("type") == "RUN_FINISHED" and data.get("runId") == "run-next"

    listener = threading.Thread(
        target=lambda: received.update(
            stream=read_sse(
                daphne_port,
                first["threadId"],
                token=alice_token,
                query={"follow": "true"},
                stop_when=second_run_finished,
            )
        )
    )
    listener.start()
    time.sleep(0.5)
    post_run(alice, second)
    work_burst(redis_queue)
    listener.join(timeout=15)

    assert not listener.is_alive()
    runs = [frame["data"]["runId"] for frame in received["stream"].events]
    assert runs[0] == first["runId"] and runs[-1] == "run-next"
    assert runs == sorted(runs, key=lambda run_id: run_id == "run-next")  # first, then next


CURSOR_INVALID = b'{"detail": "Last-Event-ID must be an event id"}'


@pytest.mark.parametrize(
    "cursor",
    [
        pytest.param("\u00b2", id="superscript-two"),
        pytest.param("\u00b9", id="superscript-one"),
        pytest.param("1" * 5_000, id="5000-digits"),
        pytest.param("9223372036854775808", id="over-bigint"),
        pytest.param("-1", id="negative"),
        pytest.param("1e3", id="exponent"),
    ],
)
def test_a_cursor_that_is_not_an_event_id_is_a_400(alice, alice_token, daphne_port, cursor):
    body = run_input()
    post_run(alice, body)
    by_header = read_sse(
        daphne_port, body["threadId"], token=alice_token, headers={"Last-Event-ID": cursor}
    )
    by_query = read_sse(
        daphne_port, body["threadId"], token=alice_token, query={"lastEventId": cursor}
    )
    for stream in (by_header, by_query):
        assert stream.status == 400, stream.body
        assert stream.headers["Content-Type"] == "application/json"
        assert stream.body == CURSOR_INVALID


@pytest.mark.parametrize(
    "raw",
    [
        pytest.param("\u00b2".encode(), id="utf8-superscript-two"),
        pytest.param("\u0661\u0662".encode(), id="utf8-arabic-indic-digits"),
        pytest.param("\U0001d7d9".encode(), id="utf8-math-digit-one"),
        pytest.param(b"\xff\xfe1", id="not-utf8"),
    ],
)
def test_a_cursor_header_outside_latin_1_is_a_400(alice, alice_token, daphne_port, raw):
    body = run_input()
    post_run(alice, body)
    # http.client sends a bytes header value as it is.
    headers: dict[str, Any] = {"Last-Event-ID": raw}
    stream = read_sse(daphne_port, body["threadId"], token=alice_token, headers=headers)
    assert stream.status == 400, stream.body
    assert stream.body == CURSOR_INVALID


@pytest.mark.parametrize(
    ("raw", "server_body"),
    [
        # "Å" in UTF-8 is b"\xc3\x85": daphne refuses \x85 (and \x0b \x0c \x1c-\x1e) in any
        # header value (RFC 9110 §5.5) with an HTML page.
        pytest.param("\u00c5".encode(), b"Invalid header value", id="daphne"),
        # Twisted refuses NUL with an empty body.
        pytest.param(b"1\x00", b"", id="twisted"),
    ],
)
def test_a_cursor_header_byte_the_server_refuses_is_its_own_400(
    alice, alice_token, daphne_port, raw, server_body
):
    # Answered by the HTTP server before the application sees the request: a 400, not JSON.
    body = run_input()
    post_run(alice, body)
    headers: dict[str, Any] = {"Last-Event-ID": raw}
    stream = read_sse(daphne_port, body["threadId"], token=alice_token, headers=headers)
    assert stream.status == 400 and server_body in stream.body


def test_a_run_id_query_with_a_nul_is_not_a_500(alice, alice_token, daphne_port):
    body = run_input()
    post_run(alice, body)
    stream = read_sse(daphne_port, body["threadId"], token=alice_token, query={"runId": "\x00"})
    assert 400 <= stream.status < 500, stream.body
    assert isinstance(json.loads(stream.body)["detail"], str)
