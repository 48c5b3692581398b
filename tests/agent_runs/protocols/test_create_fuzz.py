"""Property-based fuzzing of the two POSTs that start a response: the Agent API's
``POST /api/v1/agent/process`` and the Responses API's ``POST /openai/v1/responses``, through
Django's test client, with bodies of arbitrary JSON (the AG-UI fuzz's values: NUL, lone
surrogates, huge numbers, deep nesting) and with mutations of a valid body. Whatever is
sent, the answer is below 500, a 4xx is in the protocol's own error shape, and a refused
request writes no run.

A body that is accepted is asked not to stream (the test client would hold an endless
stream: no worker runs here) and answered after the short wait set below.
"""

import json
from typing import Any

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from agent_runs.models import Run
from tests.agent_runs.protocols.agui.test_fuzz import FUZZ, JSON_VALUES, encode

pytestmark = pytest.mark.django_db(transaction=True)

AGENT_API = "/api/v1/agent/process"
RESPONSES = "/openai/v1/responses"

VALID = {
    AGENT_API: {
        "input": [{"role": "user", "type": "message", "content": [{"type": "text", "text": "Hi"}]}],
        "session_id": "fuzz-session",
        "stream": False,
        "model": "any",
        "temperature": 0.5,
    },
    RESPONSES: {
        "model": "gpt-test",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Hi"}]}],
        "background": True,
        "metadata": {"k": "v"},
        "instructions": "Be brief",
    },
}


def error_shaped(url: str, body: Any) -> bool:
    if url == AGENT_API:
        error = body.get("error") if isinstance(body, dict) else None
        return isinstance(error, dict) and {"code", "message"} <= set(error)
    error = body.get("error") if isinstance(body, dict) else None
    return isinstance(error, dict) and {"message", "type", "param", "code"} <= set(error)


def not_streamed(value: Any) -> Any:
    if isinstance(value, dict) and value.get("stream") is True:
        return {**value, "stream": False}
    return value


def assert_answered(client: Any, url: str, raw: bytes) -> None:
    runs = Run.objects.count()
    response = client.generic("POST", url, raw, content_type="application/json")
    event(f"status {response.status_code}")
    assert response.status_code < 500, response.content
    if response.status_code >= 400:
        assert response["Content-Type"] == "application/json"
        assert error_shaped(url, json.loads(response.content)), response.content
        assert Run.objects.count() == runs  # a refused request writes no run


@st.composite
def mutated_bodies(draw: st.DrawFn, url: str) -> bytes:
    """A valid body with one place replaced, removed or added."""
    body: Any = json.loads(json.dumps(VALID[url]))
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
    return encode(not_streamed(body), draw(st.booleans()))


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


@pytest.mark.parametrize("url", [AGENT_API, RESPONSES])
def test_any_json_value_as_a_body_is_answered_below_500(alice, short_waits, url):
    @settings(FUZZ, max_examples=80)
    @given(value=JSON_VALUES, ascii_only=st.booleans())
    def answered(value: Any, ascii_only: bool) -> None:
        assert_answered(alice, url, encode(not_streamed(value), ascii_only))

    answered()


@pytest.mark.parametrize("url", [AGENT_API, RESPONSES])
def test_a_mutated_valid_body_is_answered_below_500(alice, short_waits, url):
    @settings(FUZZ, max_examples=60)
    @given(raw=mutated_bodies(url))
    def answered(raw: bytes) -> None:
        assert_answered(alice, url, raw)

    answered()
