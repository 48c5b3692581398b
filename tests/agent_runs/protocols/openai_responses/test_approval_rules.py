"""The rules an answer to approval requests meets on the Responses API (Django's test client,
a real RQ worker in this process, the loopback model): a wrong or late answer is the
Responses error shape naming the param, nothing written; an approval answered through any
other way is closed here too (and names the response that went on); two answers at once,
one here and one through the core's ``interrupt_answer``, exactly one wins; expiry closes it.
docs/protocols/openai-responses.md, Approvals."""

import json
from datetime import timedelta
from functools import partial
from typing import Any

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone
from hypothesis import given
from hypothesis import strategies as st

from agent_runs.errors import InterruptClosed
from agent_runs.models import CalendarEvent, Interrupt, Run
from agent_runs.services.interrupts import interrupt_answer, interrupts_expire
from tests.agent_runs.concurrency import at_once_behind_lock
from tests.agent_runs.protocols.agui.test_fuzz import FUZZ, JSON_VALUES, encode
from tests.conftest import send, work_burst
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]

URL = "/openai/v1/responses"
STANDUP = {"title": "Standup", "start": "2026-03-17T09:00", "event_timezone": "UTC"}


def create(client: Any, **body: Any) -> Any:
    """A background response (answered at once; the run queued on commit)."""
    body = {"model": "gpt-test", "background": True, **body}
    return send(lambda: client.post(URL, body, format="json"))


def approval(interrupt_id: str, approve: Any = True, **extra: Any) -> dict[str, Any]:
    return {
        "type": "mcp_approval_response",
        "approval_request_id": interrupt_id,
        "approve": approve,
        **extra,
    }


class Held:
    """A response of alice's whose run stopped on approvals of ``calls``."""

    def __init__(self, client: Any, model: FakeOpenAI, queue: Any, calls: list[Any]) -> None:
        model.tool_call_turns = [calls]
        model.answer = ["Done."]
        answer = create(client, input="Put a standup in my calendar")
        assert answer.status_code == 200, answer.content
        work_burst(queue)
        self.run = Run.objects.get(run_id=answer.json()["id"])
        self.interrupts = list(Interrupt.objects.filter(run=self.run).order_by("created_at"))

    def answer(self, client: Any, *items: dict[str, Any], **body: Any) -> Any:
        return create(client, previous_response_id=self.run.run_id, input=list(items), **body)


@pytest.fixture
def held(alice, fake_openai, redis_queue) -> Held:
    return Held(
        alice, fake_openai, redis_queue, [("call_c1", "calendar_create", json.dumps(STANDUP))]
    )


def error(answer: Any, status: int) -> dict[str, Any]:
    assert answer.status_code == status, answer.content
    body: dict[str, Any] = answer.json()["error"]
    assert set(body) == {"message", "type", "param", "code"}
    assert body["type"] == "invalid_request_error"
    return body


def nothing_written(held: Held) -> None:
    assert list(Run.objects.values_list("run_id", flat=True)) == [held.run.run_id]
    assert set(Interrupt.objects.values_list("status", flat=True)) == {"pending"}
    assert not CalendarEvent.objects.exists()


def test_the_held_response_reads_incomplete_with_its_approval_request(alice, held):
    (interrupt,) = held.interrupts

    response = alice.get(f"{URL}/{held.run.run_id}").json()

    assert response["status"] == "incomplete"
    assert response["incomplete_details"] == {"reason": None}
    request = response["output"][-1]
    assert request == {
        "id": interrupt.id,
        "type": "mcp_approval_request",
        "server_label": "agent",
        "name": "calendar_create",
        "arguments": json.dumps(STANDUP),
    }


@pytest.mark.parametrize(
    ("items", "body", "status", "param", "code"),
    [
        (
            [approval("int-nope")],
            {},
            400,
            "input[0].approval_request_id",
            "approval_request_not_found",
        ),
        ([approval("{id}", approve="yes")], {}, 400, "input[0].approve", "invalid_value"),
        ([approval("{id}", reason="x" * 2001)], {}, 400, "input[0].reason", "invalid_value"),
        (
            [approval("{id}"), approval("{id}")],
            {},
            400,
            "input[1].approval_request_id",
            "invalid_value",
        ),
        ([approval("{id}"), {"role": "user", "content": "hi"}], {}, 400, "input", "invalid_value"),
        ([{"type": "mcp_call_output", "id": "x"}], {}, 400, "input[0]", "invalid_value"),
    ],
    ids=["unknown", "not-a-boolean", "reason-too-long", "twice", "beside-a-message", "item-type"],
)
def test_a_wrong_answer_is_a_400_naming_the_param_and_writes_nothing(
    alice, held, items, body, status, param, code
):
    (interrupt,) = held.interrupts
    items = [json.loads(json.dumps(item).replace("{id}", interrupt.id)) for item in items]

    refused = error(held.answer(alice, *items, **body), status)

    assert (refused["param"], refused["code"]) == (param, code)
    nothing_written(held)


def test_an_answer_without_previous_response_id_is_a_400(alice, held):
    (interrupt,) = held.interrupts

    refused = error(create(alice, input=[approval(interrupt.id)]), 400)

    assert refused["param"] == "previous_response_id"
    assert refused["code"] == "missing_required_parameter"
    nothing_written(held)


def test_an_approval_request_of_another_response_is_not_found(alice, held, redis_queue):
    (interrupt,) = held.interrupts
    other = create(alice, input="Something else").json()["id"]

    refused = error(create(alice, previous_response_id=other, input=[approval(interrupt.id)]), 400)

    assert refused["param"] == "input[0].approval_request_id"
    assert refused["message"] == f"Response '{other}' has no approval request '{interrupt.id}'."
    assert Interrupt.objects.get().status == "pending"


def test_a_stranger_answering_is_a_404_and_writes_nothing(bob, held):
    (interrupt,) = held.interrupts

    refused = error(held.answer(bob, approval(interrupt.id)), 404)

    assert refused["param"] == "previous_response_id"
    assert bob.get(f"{URL}/{held.run.run_id}").status_code == 404
    nothing_written(held)


def test_a_new_message_while_an_approval_is_open_is_a_409_the_sdk_does_not_retry(alice, held):
    (interrupt,) = held.interrupts

    for body in (
        {"previous_response_id": held.run.run_id},
        {"conversation": str(held.run.thread_id)},
    ):
        refused = create(alice, input="Never mind", **body)
        assert refused.headers["x-should-retry"] == "false"
        assert error(refused, 409)["code"] == "approval_pending"
        assert interrupt.id in refused.json()["error"]["message"]
    nothing_written(held)


def test_an_answer_must_cover_every_open_approval_request(alice, fake_openai, redis_queue):
    both = [
        ("call_a", "calendar_create", json.dumps(STANDUP)),
        ("call_b", "calendar_create", json.dumps({**STANDUP, "title": "Retro"})),
    ]
    held = Held(alice, fake_openai, redis_queue, both)
    first, second = held.interrupts

    refused = error(held.answer(alice, approval(first.id)), 400)

    assert refused["code"] == "approval_responses_missing" and refused["param"] == "input"
    assert refused["message"].endswith(f"missing: {second.id}.")
    nothing_written(held)
    # Both in one request: the one approved ran, the other was declined.
    accepted = held.answer(alice, approval(first.id), approval(second.id, False, reason="no"))
    assert accepted.status_code == 200, accepted.content
    work_burst(redis_queue)
    assert list(CalendarEvent.objects.values_list("title", flat=True)) == ["Standup"]
    final = alice.get(f"{URL}/{accepted.json()['id']}").json()
    calls = {item["approval_request_id"]: item["status"] for item in final["output"][:2]}
    assert calls == {first.id: "completed", second.id: "failed"}


def test_a_second_answer_is_a_409_naming_the_response_that_went_on(alice, held, redis_queue):
    (interrupt,) = held.interrupts
    first = held.answer(alice, approval(interrupt.id))
    assert first.status_code == 200
    work_burst(redis_queue)

    again = held.answer(alice, approval(interrupt.id, False))

    refused = error(again, 409)
    assert again.headers["x-should-retry"] == "false"
    assert refused == {
        "message": f"Approval request '{interrupt.id}' is not open: it is resolved. "
        f"The conversation goes on in response '{first.json()['id']}'.",
        "type": "invalid_request_error",
        "param": "input[0].approval_request_id",
        "code": "approval_request_closed",
    }
    assert Run.objects.count() == 2 and CalendarEvent.objects.count() == 1


def test_an_approval_answered_outside_is_closed_here_and_its_run_a_response(
    alice, held, redis_queue
):
    (interrupt,) = held.interrupts
    owner = get_user_model().objects.get(username="alice")
    _, went_on = send(
        lambda: interrupt_answer(user=owner, interrupt_id=interrupt.id, payload={"approved": True})
    )
    assert went_on is not None
    work_burst(redis_queue)

    refused = error(held.answer(alice, approval(interrupt.id)), 409)

    assert refused["message"].endswith(f"goes on in response '{went_on.run_id}'.")
    # The run that went on reads as the response after the one held, its call named by
    # the approval request.
    response = alice.get(f"{URL}/{went_on.run_id}").json()
    assert response["status"] == "completed"
    assert response["previous_response_id"] == held.run.run_id
    call = response["output"][0]
    assert call["type"] == "mcp_call" and call["approval_request_id"] == interrupt.id
    assert call["status"] == "completed"
    # The held response stays what it was; a turn after it now forks (400).
    assert alice.get(f"{URL}/{held.run.run_id}").json()["status"] == "incomplete"
    after_held = create(alice, previous_response_id=held.run.run_id, input="Next")
    assert error(after_held, 400)["code"] == "previous_response_not_latest"


def test_a_responses_answer_and_the_core_s_answer_at_once_exactly_one_wins(alice, held):
    (interrupt,) = held.interrupts
    owner = get_user_model().objects.get(username="alice")
    calls = [
        partial(held.answer, alice, approval(interrupt.id)),
        partial(
            interrupt_answer, user=owner, interrupt_id=interrupt.id, payload={"approved": True}
        ),
    ]

    by_responses, by_core = at_once_behind_lock(held.run.thread_id, calls)

    runs = Run.objects.exclude(pk=held.run.pk)
    assert runs.count() == 1
    interrupt.refresh_from_db()
    assert interrupt.status == "resolved" and interrupt.answered_by_id == runs.get().pk
    if isinstance(by_core, InterruptClosed):  # the Responses answer won
        assert by_responses.status_code == 200
        assert runs.get().run_id == by_responses.json()["id"]
    else:  # the core's won: the Responses answer is its conflict
        assert isinstance(by_core, tuple) and by_core[1] is not None
        refused = error(by_responses, 409)
        assert refused["code"] == "approval_request_closed"
        assert refused["message"].endswith(f"goes on in response '{by_core[1].run_id}'.")


def test_two_responses_answers_at_once_exactly_one_wins(alice, held):
    (interrupt,) = held.interrupts
    calls = [
        partial(held.answer, alice, approval(interrupt.id, approve)) for approve in (True, False)
    ]

    answers = at_once_behind_lock(held.run.thread_id, calls)

    assert sorted(answer.status_code for answer in answers) == [200, 409]
    assert Run.objects.count() == 2


def test_an_expired_approval_request_is_a_410_and_the_conversation_goes_on(alice, held):
    (interrupt,) = held.interrupts
    Interrupt.objects.filter(pk=interrupt.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1)
    )

    late = error(held.answer(alice, approval(interrupt.id)), 410)
    assert late == {
        "message": f"Approval request '{interrupt.id}' has expired.",
        "type": "invalid_request_error",
        "param": "input[0].approval_request_id",
        "code": "approval_request_expired",
    }
    assert interrupts_expire() == 1
    assert error(held.answer(alice, approval(interrupt.id)), 410)["code"] == (
        "approval_request_expired"
    )
    assert Run.objects.count() == 1
    # Expired everywhere: the conversation takes a new message again.
    turn = create(alice, previous_response_id=held.run.run_id, input="Something else")
    assert turn.status_code == 200, turn.content


APPROVAL_ITEMS = st.lists(
    st.one_of(
        JSON_VALUES,
        st.fixed_dictionaries(
            {
                "type": st.one_of(st.just("mcp_approval_response"), JSON_VALUES),
                "approval_request_id": st.one_of(
                    st.just("{id}"), st.text(max_size=50), JSON_VALUES
                ),
                "approve": st.one_of(st.booleans(), JSON_VALUES),
            },
            optional={"reason": st.one_of(st.text(max_size=30), JSON_VALUES), "id": JSON_VALUES},
        ),
    ),
    max_size=3,
)


def test_fuzzed_answers_never_fail_the_server_and_write_nothing_when_refused(alice, held):
    (interrupt,) = held.interrupts

    @given(items=st.one_of(APPROVAL_ITEMS, JSON_VALUES), previous=st.sampled_from([True, False]))
    @FUZZ
    def answers(items: Any, previous: bool) -> None:
        payload = {"model": "m", "background": True, "input": items}
        if previous:
            payload["previous_response_id"] = held.run.run_id
        raw = encode(payload, ascii_only=True).replace(b"{id}", interrupt.id.encode())
        response = send(lambda: alice.generic("POST", URL, raw, content_type="application/json"))
        assert response.status_code < 500, response.content
        if response.status_code >= 400:
            assert set(response.json()["error"]) == {"message", "type", "param", "code"}
            nothing_written(held)
        else:  # an answer of the open request, or a new conversation: put things back
            Run.objects.exclude(pk=held.run.pk).delete()
            Interrupt.objects.filter(pk=interrupt.pk).update(
                status="pending", answer=None, answered_by=None, closed_at=None
            )

    answers()
