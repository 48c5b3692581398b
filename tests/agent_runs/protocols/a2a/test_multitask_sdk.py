"""Double texting on A2A, with the unmodified a2a-sdk client passing the strategy in the
message's ``metadata.multitask``, over real HTTP against daphne, with a real worker whose
model is a loopback server the test slows down. docs/protocols/multitask.md."""

import asyncio
import uuid
from typing import Any

import pytest
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from a2a.utils.errors import InvalidParamsError, UnsupportedOperationError
from google.protobuf.json_format import MessageToDict

from agent_runs.models import Run
from tests.agent_runs.protocols.a2a.test_a2a_sdk import client_for, collect, states
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


def message(text: str, multitask: str | None = None) -> SendMessageRequest:
    """A message beginning a task in the context ``chat``."""
    metadata = {} if multitask is None else {"multitask": multitask}
    return SendMessageRequest(
        message=Message(
            message_id=str(uuid.uuid4()),
            role=Role.ROLE_USER,
            parts=[Part(text=text)],
            context_id="chat",
            metadata=metadata,
        )
    )


def test_message_metadata_multitask_chooses_what_a_new_task_does_in_a_busy_context(
    model, alice_token
):
    model.delay = 30  # the first task's model call outlasts the test
    port = model.port

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any]]:
        client = await client_for(port, alice_token)
        stream = client.send_message(message("A long question"))
        first = MessageToDict(await anext(stream))
        await asyncio.to_thread(wait_for, lambda: model.requests)
        errors: dict[str, Any] = {}
        for value in ("later", "reject"):
            try:
                await collect(client.send_message(message("Still there?", value)))
            except Exception as exc:
                errors[value] = exc
        model.delay = 0
        instead = await collect(client.send_message(message("Do this instead", "interrupt")))
        rest = await collect(stream)
        await client.close()
        return [first, *rest], instead, errors

    first, instead, errors = asyncio.run(scenario())

    assert isinstance(errors["later"], InvalidParamsError)
    assert "must be one of: reject, enqueue, interrupt, rollback" in str(errors["later"])
    assert isinstance(errors["reject"], UnsupportedOperationError)
    assert "still working" in str(errors["reject"])
    assert states(first)[-1] == "TASK_STATE_CANCELED"
    assert states(instead)[-1] == "TASK_STATE_COMPLETED"
    assert Run.objects.count() == 2  # nothing written for the refused ones
    cancelled = Run.objects.get(run_id=first[0]["task"]["id"])
    assert cancelled.status == Run.Status.CANCELLED
    assert Run.objects.get(run_id=instead[0]["task"]["id"]).multitask == "interrupt"
