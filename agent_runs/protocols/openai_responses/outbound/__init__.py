"""A run's journal as the OpenAI Responses API's stream events and ``Response`` object.
docs/protocols/openai-responses.md (The event stream).

Pure and deterministic: the events of a journal event are a function of that event, the
response's head (what the run row and its request say: id, model, instructions, …) and what
``ResponseProjection`` keeps of the run's earlier events (the output items so far, the next
``sequence_number``). A stream always translates a run from its first event (``RUN_STARTED``),
so a replay numbers every event as the live stream did, from 0, and sends the same bytes; a
resume (``starting_after``) is the SDK's filter, client-side. The usage of a terminal event
is the run's recorded usage, which the caller reads when it meets that event (the run's
model calls are recorded before it ends, so live and replayed read the same).

A run that stops on approvals (its journal's ``CUSTOM`` ``run_interrupted``) ends the
response ``incomplete``, an ``mcp_approval_request`` item per approval; the run that goes on
with its held reply gives each call's result as an ``mcp_call`` item naming its approval
request (docs/protocols/openai-responses.md, Approvals).

Every wire object goes through the SDK's own models (``openai.types.responses``), dumped
with only the fields set here.
"""

from agent_runs.protocols.openai_responses.outbound.projection import (
    SERVER_LABEL,
    ResponseProjection,
    is_terminal,
    response_of_journal,
)
from agent_runs.protocols.openai_responses.outbound.wire import (
    WireEvent,
    usage_object,
    wire_event,
    wire_response,
)

__all__ = [
    "SERVER_LABEL",
    "ResponseProjection",
    "WireEvent",
    "is_terminal",
    "response_of_journal",
    "usage_object",
    "wire_event",
    "wire_response",
]
