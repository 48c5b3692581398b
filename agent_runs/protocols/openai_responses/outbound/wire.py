"""The Responses wire objects through the SDK's own models (``openai.types.responses``):
each event and ``Response`` checked by its model and dumped with only the fields set, and
``Response.usage`` from a run's recorded usage."""

from collections.abc import Mapping
from typing import Any

from openai.types.responses import (
    Response,
    ResponseCompletedEvent,
    ResponseContentPartAddedEvent,
    ResponseContentPartDoneEvent,
    ResponseCreatedEvent,
    ResponseFailedEvent,
    ResponseIncompleteEvent,
    ResponseInProgressEvent,
    ResponseMcpCallArgumentsDeltaEvent,
    ResponseMcpCallArgumentsDoneEvent,
    ResponseMcpCallCompletedEvent,
    ResponseMcpCallFailedEvent,
    ResponseMcpCallInProgressEvent,
    ResponseOutputItemAddedEvent,
    ResponseOutputItemDoneEvent,
    ResponseTextDeltaEvent,
    ResponseTextDoneEvent,
)
from pydantic import BaseModel

WireEvent = dict[str, Any]

_EVENT_MODELS: dict[str, type[BaseModel]] = {
    model.model_fields["type"].annotation.__args__[0]: model  # type: ignore[union-attr]  # a Literal
    for model in (
        ResponseCreatedEvent,
        ResponseInProgressEvent,
        ResponseCompletedEvent,
        ResponseFailedEvent,
        ResponseIncompleteEvent,
        ResponseOutputItemAddedEvent,
        ResponseOutputItemDoneEvent,
        ResponseContentPartAddedEvent,
        ResponseContentPartDoneEvent,
        ResponseTextDeltaEvent,
        ResponseTextDoneEvent,
        ResponseMcpCallArgumentsDeltaEvent,
        ResponseMcpCallArgumentsDoneEvent,
        ResponseMcpCallInProgressEvent,
        ResponseMcpCallCompletedEvent,
        ResponseMcpCallFailedEvent,
    )
}


def wire_response(response: Mapping[str, Any]) -> dict[str, Any]:
    """A ``Response`` object as sent: checked by the SDK's model, only the fields given."""
    dumped: dict[str, Any] = Response.model_validate(response).model_dump(
        mode="json", exclude_unset=True
    )
    return dumped


def wire_event(event: dict[str, Any]) -> WireEvent:
    """A stream event as sent: checked by the SDK's model of its type, only the fields given."""
    model = _EVENT_MODELS[event["type"]]
    dumped: WireEvent = model.model_validate(event).model_dump(mode="json", exclude_unset=True)
    return dumped


def usage_object(
    *, input_tokens: int, output_tokens: int, cached_tokens: int, reasoning_tokens: int
) -> dict[str, Any]:
    """``Response.usage`` from a run's recorded usage. The providers report no cache writes
    apart from misses, so ``cache_write_tokens`` (required by the SDK's model) is 0."""
    return {
        "input_tokens": input_tokens,
        "input_tokens_details": {"cached_tokens": cached_tokens, "cache_write_tokens": 0},
        "output_tokens": output_tokens,
        "output_tokens_details": {"reasoning_tokens": reasoning_tokens},
        "total_tokens": input_tokens + output_tokens,
    }
