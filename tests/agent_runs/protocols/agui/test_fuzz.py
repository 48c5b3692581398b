"""Property-based fuzzing of the AG-UI edge.

``POST /api/v1/agent/runs`` (and the conversation endpoint ``POST /api/v1/agent/ag-ui``)
through Django's test client with bodies made of arbitrary JSON (NUL, lone surrogates, huge
integers, ``NaN``/``Infinity`` as raw text, deep nesting), of mutations of a valid
RunAgentInput, and of arbitrary bytes; and the events endpoint over real
HTTP against daphne with arbitrary cursors and query values. Whatever is sent, the answer is
never a 5xx, a 4xx is JSON ``{"detail": "<string>"}``, and a rejected run writes nothing.
"""

import copy
import http.client
import json
import uuid
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from pydantic.alias_generators import to_snake

from agent_runs.models import Message, Run, Thread
from tests.agent_runs.sse import read_sse
from tests.conftest import post_run, run_input, work_burst

URL = "/api/v1/agent/runs"
AG_UI = "/api/v1/agent/ag-ui"

# No example database: each run draws anew, and none is kept between runs (hypothesis still
# caches some data in .hypothesis/, which ignores itself in git).
FUZZ = settings(
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


# JSON text, including what json.dumps will not write ------------------------------------


@dataclass(frozen=True)
class Raw:
    """JSON text put into a body as it is: a number no decoder should take, deep nesting."""

    text: str


UNSTORABLE_CHARS = st.one_of(
    st.sampled_from(["\x00", "\ud800", "\udbff", "\udc00", "\udfff"]),
    st.characters(categories=["Cs"]),
)
STRINGS = st.one_of(
    st.text(max_size=12),
    st.lists(st.one_of(st.characters(), UNSTORABLE_CHARS), max_size=8).map("".join),
)
RAW_NUMBERS = st.one_of(
    st.integers(min_value=90, max_value=6_000).map(lambda digits: Raw("9" * digits)),
    st.integers(min_value=90, max_value=6_000).map(lambda digits: Raw("-" + "1" * digits)),
    st.sampled_from(
        [Raw(text) for text in ("NaN", "Infinity", "-Infinity", "1e400", "-1e400", "1e-400", "-0")]
    ),
    st.integers(min_value=300, max_value=5_000).map(lambda digits: Raw("1" * digits + ".5")),
)
DEEP = st.builds(
    lambda depth, as_object: (
        Raw('{"a":' * depth + "0" + "}" * depth) if as_object else Raw("[" * depth + "]" * depth)
    ),
    st.integers(min_value=60, max_value=3_000),
    st.booleans(),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and infinities included: json.dumps writes them as NaN, Infinity
    STRINGS,
    RAW_NUMBERS,
    DEEP,
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(STRINGS, children, max_size=4),
    ),
    max_leaves=20,
)


def dumps(value: Any, *, ascii_only: bool) -> str:
    """JSON text of ``value``, ``Raw`` parts as they are; with ``ascii_only=False`` a lone
    surrogate is written as itself (sent as its raw UTF-8-style bytes) rather than escaped."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, list):
        return "[" + ",".join(dumps(item, ascii_only=ascii_only) for item in value) + "]"
    if isinstance(value, dict):
        return (
            "{"
            + ",".join(
                f"{json.dumps(key, ensure_ascii=ascii_only)}:{dumps(item, ascii_only=ascii_only)}"
                for key, item in value.items()
            )
            + "}"
        )
    return json.dumps(value, ensure_ascii=ascii_only)


def encode(value: Any, ascii_only: bool) -> bytes:
    return dumps(value, ascii_only=ascii_only).encode("utf-8", "surrogatepass")


# Valid RunAgentInputs and their mutations ------------------------------------------------


def valid_body(thread_id: uuid.UUID, shape: str) -> dict[str, Any]:
    """A valid RunAgentInput of one of a few shapes (all accepted as they are)."""
    body = run_input(threadId=str(thread_id), runId=f"run-{thread_id.hex[:12]}")
    if shape == "blocks":
        body["messages"][0]["content"] = [
            {"type": "text", "text": "What is on"},
            {"type": "text", "text": "my calendar?"},
        ]
    elif shape == "full":
        body.update(
            parentRunId="run-parent",
            state={"draft": {"items": [1, 2.5, "three", None, True]}},
            messages=[
                {"id": "msg-001", "role": "user", "content": "Plan my day"},
                {
                    "id": "msg-002",
                    "role": "assistant",
                    "content": None,
                    "toolCalls": [
                        {
                            "id": "call-1",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": "x"}'},
                        }
                    ],
                },
                {"id": "msg-003", "role": "tool", "content": "ok", "toolCallId": "call-1"},
            ],
            tools=[{"name": "lookup", "description": "Look up", "parameters": {"type": "object"}}],
            context=[{"description": "note", "value": "be brief"}],
            forwardedProps={
                "runtime_mode": "chat",
                "client_time": {
                    "device_timezone": "Europe/Paris",
                    "client_now_iso": "2026-03-16T09:12:33+01:00",
                    "client_epoch_ms": 1773649953000,
                },
            },
        )
    return body


PATHS: list[tuple[str | int, ...]] = [
    ("threadId",),
    ("runId",),
    ("parentRunId",),
    ("state",),
    ("state", "draft"),
    ("state", "draft", "items", 0),
    ("messages",),
    ("messages", 0),
    ("messages", 0, "id"),
    ("messages", 0, "role"),
    ("messages", 0, "content"),
    ("messages", 0, "content", 0),
    ("messages", 0, "content", 0, "type"),
    ("messages", 0, "content", 0, "text"),
    ("messages", 1),
    ("messages", 1, "role"),
    ("messages", 1, "content"),
    ("messages", 1, "toolCalls"),
    ("messages", 1, "toolCalls", 0, "id"),
    ("messages", 1, "toolCalls", 0, "function"),
    ("messages", 1, "toolCalls", 0, "function", "arguments"),
    ("messages", 2, "toolCallId"),
    ("tools",),
    ("tools", 0, "name"),
    ("tools", 0, "parameters"),
    ("context",),
    ("context", 0, "value"),
    ("forwardedProps",),
    ("forwardedProps", "runtime_mode"),
    ("forwardedProps", "client_time"),
    ("forwardedProps", "client_time", "device_timezone"),
    ("forwardedProps", "client_time", "client_now_iso"),
    ("forwardedProps", "client_time", "client_epoch_ms"),
    ("protocolVersion",),
    ("resume",),
]

DELETE = object()
WRONG_TYPES = st.sampled_from([None, 0, -1, 1.5, True, "", " ", [], {}, [None], {"": None}])
HUGE_STRINGS = st.builds(
    lambda char, length: char * length,
    st.sampled_from(["x", "中", "\U0001f600", " "]),
    st.sampled_from([129, 201, 10_001, 60_000]),
)
HUGE_LISTS = st.builds(
    lambda item, length: [item] * length,
    st.sampled_from([{"id": "m", "role": "assistant", "content": "a"}, {}, "x", 0]),
    st.sampled_from([4, 201, 5_000]),
)
REPLACEMENTS = st.one_of(
    st.just(DELETE), WRONG_TYPES, HUGE_STRINGS, HUGE_LISTS, DEEP, RAW_NUMBERS, JSON_VALUES
)


def mutated(body: dict[str, Any], path: tuple[str | int, ...], replacement: Any) -> None:
    """Replace (or delete) the value at ``path`` in place; a path the body does not have
    (a mutation already removed its parent) is left alone."""
    parent: Any = body
    for step in path[:-1]:
        try:
            parent = parent[step]
        except (KeyError, IndexError, TypeError):
            return
    last = path[-1]
    if isinstance(parent, dict) and isinstance(last, str):
        if replacement is DELETE:
            parent.pop(last, None)
        else:
            parent[last] = replacement
    elif isinstance(parent, list) and isinstance(last, int) and last < len(parent):
        if replacement is DELETE:
            del parent[last]
        else:
            parent[last] = replacement


def snake_cased(body: dict[str, Any]) -> dict[str, Any]:
    return {to_snake(key): value for key, value in body.items()}


@st.composite
def mutated_bodies(draw: st.DrawFn) -> bytes:
    body = valid_body(draw(st.uuids()), draw(st.sampled_from(["plain", "blocks", "full"])))
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        # A copy: the strategies hand out the same list and dict objects again, and a later
        # mutation inside one of them could put it inside itself (a cycle).
        replacement = draw(REPLACEMENTS)
        if replacement is not DELETE:
            replacement = copy.deepcopy(replacement)
        mutated(body, draw(st.sampled_from(PATHS)), replacement)
    if draw(st.booleans()):
        body = snake_cased(body)
    return encode(body, ascii_only=draw(st.booleans()))


@st.composite
def damaged_bytes(draw: st.DrawFn) -> bytes:
    """Arbitrary bytes, or a valid body cut short or with bytes overwritten."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=400))
    raw = bytearray(json.dumps(valid_body(draw(st.uuids()), "full")).encode())
    if draw(st.booleans()):
        return bytes(raw[: draw(st.integers(min_value=0, max_value=len(raw)))])
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        raw[draw(st.integers(min_value=0, max_value=len(raw) - 1))] = draw(
            st.integers(min_value=0, max_value=255)
        )
    return bytes(raw)


# POST /api/v1/agent/runs -----------------------------------------------------------------


def row_counts() -> tuple[int, int, int]:
    return Thread.objects.count(), Run.objects.count(), Message.objects.count()


def assert_answered(client: Any, raw: bytes, url: str = URL) -> None:
    """The request is answered below 500; a 4xx is ``{"detail": str}`` and writes nothing.
    (Asking for JSON: what comes after validation, the stream, is tested over HTTP.)"""
    before = row_counts()
    data: Any = raw  # the stub says str; Django's test client sends bytes as they are
    response = client.generic(
        "POST", url, data=data, content_type="application/json", HTTP_ACCEPT="application/json"
    )
    assert response.status_code < 500, response.content
    event(f"POST {response.status_code}")
    if response.status_code >= 400:
        body = response.json()
        assert isinstance(body, dict) and isinstance(body.get("detail"), str), body
        assert row_counts() == before, response.content
    else:
        assert response.status_code == 202, response.content
        assert Run.objects.filter(run_id=response.json()["runId"]).exists()


@pytest.mark.django_db
@settings(FUZZ, max_examples=150)
@given(value=JSON_VALUES, ascii_only=st.booleans())
def test_any_json_value_as_a_body_is_answered_below_500(alice, value, ascii_only):
    assert_answered(alice, encode(value, ascii_only))


@pytest.mark.django_db
@settings(FUZZ, max_examples=120)
@given(value=JSON_VALUES, ascii_only=st.booleans())
def test_any_json_value_as_client_state_is_answered_below_500(alice, value, ascii_only):
    body = valid_body(uuid.uuid4(), "plain")
    body["state"] = value
    assert_answered(alice, encode(body, ascii_only))


@pytest.mark.django_db
@settings(FUZZ, max_examples=250)
@given(raw=mutated_bodies())
def test_a_mutated_run_agent_input_is_answered_below_500(alice, raw):
    assert_answered(alice, raw)


@pytest.mark.django_db
@settings(FUZZ, max_examples=120)
@given(raw=damaged_bytes())
def test_arbitrary_bytes_as_json_are_answered_below_500(alice, raw):
    assert_answered(alice, raw)


@st.composite
def conversations(draw: st.DrawFn) -> bytes:
    """Mutated bodies as AG-UI clients send them: ``forwardedProps`` often empty, and at
    times earlier messages before a new user message (unknown to a new thread)."""
    body = valid_body(draw(st.uuids()), draw(st.sampled_from(["plain", "blocks", "full"])))
    if draw(st.booleans()):
        body["forwardedProps"] = {}
    if body["messages"][-1]["role"] != "user" and draw(st.booleans()):
        body["messages"].append({"id": "msg-new", "role": "user", "content": "And then?"})
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        mutated(body, draw(st.sampled_from(PATHS)), draw(REPLACEMENTS))
    return encode(body, ascii_only=draw(st.booleans()))


@pytest.mark.django_db
@settings(FUZZ, max_examples=200)
@given(raw=st.one_of(conversations(), damaged_bytes(), JSON_VALUES.map(lambda v: encode(v, True))))
def test_any_conversation_body_is_answered_below_500(alice, raw):
    assert_answered(alice, raw, url=AG_UI)


@pytest.mark.django_db
def test_the_valid_bodies_the_mutations_start_from_are_accepted(alice):
    for shape in ("plain", "blocks", "full"):
        for ascii_only in (True, False):
            body = valid_body(uuid.uuid4(), shape)
            response = alice.generic(
                "POST", URL, data=encode(body, ascii_only), content_type="application/json"
            )
            assert response.status_code == 202, response.content
            assert response.json()["runId"] == body["runId"]


# GET /api/v1/agent/runs/{threadId}/events over real HTTP ---------------------------------


def header_safe(text: str) -> str:
    return text.replace("\r", "").replace("\n", "")


EVENT_IDS = st.one_of(
    st.just(""),
    st.sampled_from([" ", "\t", " 1 ", "0", "00", "-1", "+1", "1.0", "1e3", "0x1", "1_000"]),
    st.sampled_from(["\u00b2", "\u00b9", "\u0661", "\uff19", "\U0001d7d9", "\u2167"]),
    st.integers(min_value=0, max_value=2**70).map(str),
    st.integers(min_value=19, max_value=6_000).map(lambda digits: "9" * digits),
    st.text(alphabet=st.characters(categories=["Nd", "No", "Nl"]), min_size=1, max_size=6),
    st.text(max_size=20),
)
HEADER_VALUES = st.tuples(EVENT_IDS.map(header_safe), st.sampled_from(["utf-8", "latin-1"])).map(
    lambda pair: pair[0].encode(pair[1], "replace")
)
# Header value bytes the HTTP server answers with a 400 of its own before the application
# sees the request: NUL (Twisted, an empty body), and \x0b \x0c \x1c-\x1e \x85 (daphne, an
# HTML page: RFC 9110 §5.5; Python would take them for whitespace or line breaks).
SERVER_REFUSED_BYTES = frozenset(b"\x00\x0b\x0c\x1c\x1d\x1e\x85")
RUN_ID_QUERY_VALUES = st.one_of(st.text(max_size=140), st.sampled_from(["\x00", "run\x00"]))
FOLLOW = st.one_of(st.sampled_from(["true", "1", "yes", "TRUE", "false", "0", ""]), st.text())


@pytest.fixture
def stream_threads(alice, bob, redis_queue) -> dict[str, Any]:
    """Alice's thread whose run a worker ran, her thread whose run she cancelled before it
    started, Bob's thread (a stranger's to Alice), and a thread id nobody has."""
    own = run_input()
    post_run(alice, own)
    work_burst(redis_queue)
    cancelled = run_input()
    post_run(alice, cancelled)
    response = alice.post(f"{URL}/{cancelled['runId']}/cancel")
    assert response.status_code == 200, response.content
    stranger = run_input()
    post_run(bob, stranger)
    return {
        "own": own["threadId"],
        "cancelled": cancelled["threadId"],
        "stranger": stranger["threadId"],
        "unknown": str(uuid.uuid4()),
        "run_ids": [own["runId"], cancelled["runId"], stranger["runId"]],
    }


def get_events(port: int, path: str, headers: dict[str, Any]) -> tuple[int, str, bytes]:
    """Status, content type and (for an error) body; a 200 stream is closed at once."""
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
    try:
        connection.request("GET", path, headers=headers)
        response = connection.getresponse()
        content_type = response.getheader("Content-Type", "")
        body = b"" if response.status == 200 else response.read()
        return response.status, content_type, body
    finally:
        connection.close()


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
@settings(FUZZ, max_examples=150)
@given(data=st.data())
def test_any_cursor_and_query_on_the_event_stream_is_answered_below_500(
    alice_token, daphne_port, stream_threads, data
):
    thread = data.draw(st.sampled_from(["own", "cancelled", "stranger", "unknown"]))
    headers: dict[str, Any] = {"Authorization": f"Bearer {alice_token}"}
    if data.draw(st.booleans()):
        headers["Last-Event-ID"] = data.draw(HEADER_VALUES)
    query: dict[str, str] = {}
    if data.draw(st.booleans()):
        query["lastEventId"] = data.draw(EVENT_IDS)
    if data.draw(st.booleans()):
        query["runId"] = data.draw(
            st.one_of(st.sampled_from(stream_threads["run_ids"]), RUN_ID_QUERY_VALUES)
        )
    if data.draw(st.booleans()):
        query["follow"] = data.draw(FOLLOW)
    path = f"/api/v1/agent/runs/{stream_threads[thread]}/events"
    if query:
        path += "?" + urlencode(query)

    status, content_type, body = get_events(daphne_port, path, headers)

    assert status < 500, (status, body)
    event(f"GET {status}")
    if SERVER_REFUSED_BYTES.intersection(headers.get("Last-Event-ID", b"")):
        assert status == 400, (status, body)
    elif status == 200:
        assert content_type.startswith("text/event-stream")
    else:
        assert 400 <= status < 500 and content_type == "application/json", (status, body)
        detail = json.loads(body)["detail"]
        assert isinstance(detail, str)
    if thread in ("stranger", "unknown"):
        assert status in (400, 404), (status, body)


@pytest.mark.django_db(transaction=True)
@pytest.mark.integration
def test_the_stream_still_serves_its_events_after_the_fuzzing(
    alice_token, daphne_port, stream_threads
):
    worked = read_sse(daphne_port, stream_threads["own"], token=alice_token, max_frames=3)
    cancelled = read_sse(daphne_port, stream_threads["cancelled"], token=alice_token)
    assert worked.status == 200 and worked.frames[0] == {"retry": "3000"}
    assert worked.types[:2] == ["RUN_STARTED", "STEP_STARTED"]
    assert cancelled.status == 200 and cancelled.types[-1] == "RUN_ERROR"
