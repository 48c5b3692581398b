"""Property-based fuzzing of ``POST /a2a`` through Django's test client: bodies of arbitrary
JSON (the AG-UI fuzz's values: NUL, lone surrogates, huge numbers, deep nesting) and
mutations of a valid ``SendMessage`` (1.0, with its header) and ``message/send`` (0.3).
Whatever is sent, the answer is a JSON-RPC response below 500; an error writes no run, a
result exactly one. And answers to a task waiting on an approval (its run stopped by an
in-process worker on a loopback model): any parts, none answered with a 5xx, a refused one
writing nothing and leaving the interrupt open.

A valid body asks to be answered at once (``returnImmediately``; the 0.3 one after the short
wait set below): no worker runs here."""

import json
import uuid
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from agent_runs.models import Interrupt, Run
from tests.agent_runs.protocols.agui.test_fuzz import FUZZ, JSON_VALUES, encode
from tests.conftest import send, work_burst

pytestmark = pytest.mark.django_db(transaction=True)

URL = "/a2a"
MESSAGE = {"messageId": "m1", "role": "ROLE_USER", "parts": [{"text": "Hi"}]}
VALID = {
    "1.0": {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {
            "message": {**MESSAGE, "contextId": "fuzz-context"},
            "configuration": {"returnImmediately": True, "historyLength": 2},
        },
    },
    "0.3": {
        "jsonrpc": "2.0",
        "id": "one",
        "method": "message/send",
        "params": {
            "message": {
                "kind": "message",
                "messageId": "m1",
                "role": "user",
                "parts": [{"kind": "text", "text": "Hi"}],
            },
        },
    },
}


def assert_answered(client: Any, raw: bytes, version: str | None, *, fuzzing: bool = True) -> None:
    runs = Run.objects.count()
    headers = {"HTTP_A2A_VERSION": version} if version else {}
    response = client.generic("POST", URL, raw, content_type="application/json", **headers)
    if fuzzing:
        event(f"status {response.status_code}")
    assert response.status_code == 200, response.content
    body = json.loads(response.content)
    assert body["jsonrpc"] == "2.0" and ("result" in body) != ("error" in body), body
    if "error" in body:
        if fuzzing:
            event(f"code {body['error']['code']}")
        assert isinstance(body["error"]["code"], int) and body["error"]["message"]
        assert Run.objects.count() == runs  # a refused request writes no run
    else:
        assert Run.objects.count() == runs + 1


@st.composite
def mutated_bodies(draw: st.DrawFn, version: str) -> bytes:
    """A valid body with one place replaced, removed or added."""
    body: Any = json.loads(json.dumps(VALID[version]))
    place = body
    path = draw(st.sampled_from(_paths(body)))
    for key in path[:-1]:
        place = place[key]
    last = path[-1]
    action = draw(st.sampled_from(["replace", "delete", "add"]))
    if action == "delete" and isinstance(place, dict):
        place.pop(last, None)
    elif action == "add" and isinstance(place, dict):
        place[draw(st.text(max_size=8))] = draw(JSON_VALUES)
    else:
        place[last] = draw(JSON_VALUES)
    return encode(body, draw(st.booleans()))


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    items = value.items() if isinstance(value, dict) else enumerate(value)
    paths = []
    for key, item in items:
        paths.append((*prefix, key))
        if isinstance(item, dict | list) and item:
            paths += _paths(item, (*prefix, key))
    return paths


@pytest.fixture
def short_waits(settings: Any, redis_queue: Any) -> None:
    settings.AGENT_RESPONSE_WAIT_SECONDS = 1


def test_the_valid_bodies_are_accepted(alice, short_waits):
    for version, body in VALID.items():
        header = "1.0" if version == "1.0" else None
        assert_answered(alice, json.dumps(body).encode(), header, fuzzing=False)


@pytest.mark.parametrize("version", ["1.0", None])
def test_any_json_value_as_a_body_is_a_json_rpc_answer(alice, short_waits, version):
    @settings(FUZZ, max_examples=80)
    @given(value=JSON_VALUES, ascii_only=st.booleans())
    def answered(value: Any, ascii_only: bool) -> None:
        assert_answered(alice, encode(value, ascii_only), version)

    answered()


@pytest.mark.parametrize("version", ["1.0", "0.3"])
def test_a_mutated_valid_body_is_a_json_rpc_answer(alice, short_waits, version):
    @settings(FUZZ, max_examples=80)
    @given(raw=mutated_bodies(version))
    def answered(raw: bytes) -> None:
        assert_answered(alice, raw, "1.0" if version == "1.0" else None)

    answered()


def answer_parts(interrupt_id: str) -> st.SearchStrategy[Any]:
    """Parts of an answer: well-formed ones (the real id or not, any ``approved``, any
    extra keys), typed answers, and any JSON."""
    answer = st.fixed_dictionaries(
        {
            "interruptId": st.one_of(st.just(interrupt_id), st.text(max_size=50), JSON_VALUES),
            "approved": st.one_of(st.booleans(), JSON_VALUES),
        },
        optional={"arguments": JSON_VALUES, "reason": JSON_VALUES, "extra": JSON_VALUES},
    )
    typed = st.one_of(
        st.sampled_from(["approve", "reject", "Reject: not now", "APPROVE!", "maybe"]),
        st.text(max_size=40),
    )
    part = st.one_of(
        st.builds(lambda data: {"data": data}, st.one_of(answer, JSON_VALUES)),
        st.builds(lambda text: {"text": text}, typed),
        JSON_VALUES,
    )
    return st.one_of(st.lists(part, max_size=3), JSON_VALUES)


def test_fuzzed_answers_to_an_approval_never_fail_the_server_and_write_nothing_when_refused(
    alice, fake_openai, redis_queue
):
    fake_openai.tool_call_turns = [
        [("call_c1", "calendar_create", json.dumps({"title": "Standup", "start": "09:00"}))]
    ]
    asked = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": MESSAGE, "configuration": {"returnImmediately": True}},
    }
    task = send(lambda: alice.post(URL, asked, format="json", HTTP_A2A_VERSION="1.0")).json()[
        "result"
    ]["task"]
    work_burst(redis_queue)
    interrupt = Interrupt.objects.get(run__run_id=task["id"])

    @settings(FUZZ, max_examples=100)
    @given(parts=answer_parts(interrupt.id), ascii_only=st.booleans())
    def answered(parts: Any, ascii_only: bool) -> None:
        message = {
            "messageId": str(uuid.uuid4()),
            "role": "ROLE_USER",
            "taskId": task["id"],
            "parts": parts,
        }
        params = {"message": message, "configuration": {"returnImmediately": True}}
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": params}
        runs = Run.objects.count()
        response = send(
            lambda: alice.generic(
                "POST",
                URL,
                encode(body, ascii_only),
                content_type="application/json",
                HTTP_A2A_VERSION="1.0",
            )
        )
        assert response.status_code == 200, response.content
        answer = json.loads(response.content)
        if "error" in answer:
            event(f"code {answer['error']['code']}")
            assert isinstance(answer["error"]["code"], int) and answer["error"]["message"]
            assert Run.objects.count() == runs
            interrupt.refresh_from_db()
            assert interrupt.status == Interrupt.Status.PENDING
        else:  # it answered the open interrupt: put it back
            event("answered")
            assert answer["result"]["task"]["id"] == task["id"]
            Run.objects.filter(parent_run_id=task["id"]).delete()
            Interrupt.objects.filter(pk=interrupt.pk).update(
                status="pending", answer=None, answered_by=None, closed_at=None
            )

    answered()
