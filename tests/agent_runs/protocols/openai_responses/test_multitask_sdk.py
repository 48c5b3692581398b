"""Double texting on the Responses API, with the unmodified ``openai`` SDK passing the
strategy as ``metadata.multitask``, over real HTTP against daphne, with a real worker whose
model is a loopback server the test slows down. docs/protocols/multitask.md."""

from typing import Any

import openai
import pytest

from agent_runs.models import Run
from tests.agent_runs.protocols.openai_responses.test_openai_sdk import model, sdk
from tests.conftest import wait_for

__all__ = ["model"]  # the fixture, used by name

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def ask(client: openai.OpenAI, text: str, **options: Any) -> Any:
    return client.responses.create(model="gpt-test", input=text, conversation="trip", **options)


def test_metadata_multitask_chooses_what_a_turn_on_a_busy_conversation_does(model, alice_token):
    client = sdk(model.port, alice_token)
    model.delay = 30  # the first response's model call outlasts the test
    first = ask(client, "A long question", background=True)
    wait_for(lambda: model.requests)

    with pytest.raises(openai.ConflictError) as busy:  # the default here: reject
        ask(client, "Still there?")
    with pytest.raises(openai.ConflictError) as rejected:
        ask(client, "Still there?", metadata={"multitask": "reject"})
    with pytest.raises(openai.BadRequestError) as unknown:
        ask(client, "Still there?", metadata={"multitask": "later"})
    model.delay = 0
    queued = ask(client, "Then this", background=True, metadata={"multitask": "enqueue"})
    answer = ask(client, "Stop: do this instead", metadata={"multitask": "interrupt"})
    wait_for(lambda: client.responses.retrieve(queued.id).status == "completed")

    assert busy.value.code == rejected.value.code == "conversation_locked"
    assert unknown.value.param == "metadata.multitask" and unknown.value.code == "invalid_value"
    assert "must be one of: reject, enqueue, interrupt, rollback" in unknown.value.message
    assert answer.status == "completed" and answer.output_text
    assert answer.metadata == {"multitask": "interrupt"}
    assert client.responses.retrieve(first.id).status == "cancelled"
    runs = Run.objects.filter(run_id__in=[first.id, queued.id, answer.id])
    assert runs.count() == 3  # nothing written for the refused ones
    started = list(runs.exclude(started_at=None).order_by("started_at"))
    assert [run.run_id for run in started] == [first.id, answer.id, queued.id]


def test_rollback_leaves_the_cancelled_response_out_of_the_models_context(model, alice_token):
    client = sdk(model.port, alice_token)
    model.delay = 30
    ask(client, "Forget this secret: swordfish", background=True)
    wait_for(lambda: model.requests)
    model.delay = 0
    seen = len(model.requests)

    answer = ask(client, "What do you know?", metadata={"multitask": "rollback"})

    assert answer.status == "completed"
    later = str([request["body"]["messages"] for request in model.requests[seen:]])
    assert "What do you know?" in later and "swordfish" not in later
    assert Run.objects.filter(rolled_back=True).count() == 1
