"""Property-based fuzzing of ``POST /a2a`` through Django's test client: bodies of arbitrary
JSON (the AG-UI fuzz's values: NUL, lone surrogates, huge numbers, deep nesting) and
mutations of a valid ``SendMessage`` (1.0, with its header) and ``message/send`` (0.3).
Whatever is sent, the answer is a JSON-RPC response below 500; an error writes no run, a
result exactly one.

A valid body asks to be answered at once (``returnImmediately``; the 0.3 one after the short
wait set below): no worker runs here."""

import json
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from agent_runs.models import Run
from tests.agent_runs.protocols.agui.test_fuzz import FUZZ, JSON_VALUES, encode

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
