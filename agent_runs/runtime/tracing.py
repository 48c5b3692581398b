"""Traces of runs on the worker (docs/operations.md, "Tracing"): with tracing on
(agent_runs/tracing.py), each run a job executes is a trace of its own: a span for the run,
linked to the span of the request that made it (the trace context kept in ``Run.request``),
a span for each stage, each model call (OpenTelemetry's GenAI conventions, with the call's
cost) and each tool call, every one of them with the run's and the thread's ids.

Off, every function here returns at once having made nothing, and nothing of OpenTelemetry
is imported. A model call has no hook on its path, token by token: its span is made from its
record once it is priced (``model_call_span``, on the database thread that records it). Tool
calls are AgentScope's own tracing (its ``TracingMiddleware``), which only a traced worker
gives its agents.

A worker runs many runs at once, each as its own asyncio task (runtime/host.py), and a task
runs in a context of its own: OpenTelemetry keeps the current span in a context variable, so
a run's spans (and AgentScope's) have that run's spans as parents, never another's. The
run's ids ride in the same context (``_RUN_IDS``), and a span processor writes them on
every span started in it.
"""

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from decimal import Decimal
from functools import cache
from typing import TYPE_CHECKING, Any

from agent_runs.tracing import RUN_TRACE_CONTEXT_KEY, tracing_start

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from agent_runs.models import Run
    from agent_runs.runtime.chat_models import ModelCall

RUN_ID = "agent_run.run_id"
THREAD_ID = "agent_run.thread_id"
STAGE = "agent_run.stage"
STATUS = "agent_run.status"
JOB_STOPPED = "agent_run.job_stopped"
COST = "gen_ai.usage.cost"
COST_CURRENCY = "gen_ai.usage.cost_currency"
COST_SOURCE = "gen_ai.usage.cost_source"
# The key of the run's ids in OpenTelemetry's context.
_RUN_IDS = "agent_runs.run_ids"

_tracer: "Tracer | None" = None


def worker_tracing_start() -> bool:
    """Trace this worker's runs when tracing is on (once per process); whether it is."""
    global _tracer
    if not tracing_start(service_name="agent-run-worker"):
        return False
    if _tracer is None:
        from opentelemetry import trace

        provider: Any = trace.get_tracer_provider()
        provider.add_span_processor(_run_ids_processor())
        _tracer = trace.get_tracer("agent_runs")
    return True


def _run_ids_processor() -> Any:
    from opentelemetry import context
    from opentelemetry.sdk.trace import SpanProcessor

    class RunIds(SpanProcessor):
        """Writes the run's ids, where the span's context has them, on the span."""

        def on_start(self, span: Any, parent_context: Any = None) -> None:
            ids = context.get_value(_RUN_IDS, parent_context)
            if ids:
                span.set_attributes(ids)

    return RunIds()


@contextmanager
def run_span(run: "Run", *, job_id: str | None) -> Iterator["Span | None"]:
    """The run's span, current in the run's task while it runs (``None`` when tracing is
    off): a trace of its own, linked to the request that made the run."""
    if _tracer is None:
        yield None
        return
    from opentelemetry import context, trace

    # The thread is the conversation (AgentScope's spans would name its agent's session).
    thread_id = str(run.thread_id)
    ids = {RUN_ID: run.run_id, THREAD_ID: thread_id, "gen_ai.conversation.id": thread_id}
    root = context.set_value(_RUN_IDS, ids, context.Context())
    attributes: dict[str, Any] = {}
    if job_id:
        attributes.update({"messaging.system": "rq", "messaging.message.id": job_id})
    span = _tracer.start_span(
        "agent_run",
        context=root,
        kind=trace.SpanKind.CONSUMER,
        links=_request_links(run),
        attributes=attributes,
    )
    token = context.attach(trace.set_span_in_context(span, root))
    try:
        yield span
    except asyncio.CancelledError:
        # Its job was stopped: the run was cancelled (or failed, with its RUN_ERROR).
        span.set_attribute(JOB_STOPPED, True)
        raise
    except BaseException as exc:
        span.record_exception(exc)
        span.set_status(trace.StatusCode.ERROR, type(exc).__name__)
        raise
    finally:
        context.detach(token)
        span.end()


def run_span_ended(span: "Span | None", status: str | None) -> None:
    """The status the run ended with under its job (``None``: parked, or ended by another)."""
    if span is None or status is None:
        return
    from opentelemetry.trace import StatusCode

    span.set_attribute(STATUS, status)
    if status == "failed":
        span.set_status(StatusCode.ERROR, "the run failed")


def _request_links(run: "Run") -> list[Any]:
    carrier = (run.request or {}).get(RUN_TRACE_CONTEXT_KEY)
    if not isinstance(carrier, dict):
        return []
    from opentelemetry import trace
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    request = trace.get_current_span(TraceContextTextMapPropagator().extract(carrier))
    span_context = request.get_span_context()
    if not span_context.is_valid:
        return []
    return [trace.Link(span_context, {"agent_run.link": "created_by_request"})]


@contextmanager
def stage_span(stage: str) -> Iterator[None]:
    """A stage's span, current in the run's task while the stage runs."""
    if _tracer is None:
        yield
        return
    with _tracer.start_as_current_span(f"stage {stage}", attributes={STAGE: stage}):
        yield


def current_context() -> Any:
    """The current OpenTelemetry context (a stage's, in a run's task), for a span made
    later elsewhere (``model_call_span``); ``None`` when tracing is off."""
    if _tracer is None:
        return None
    from opentelemetry import context

    return context.get_current()


def model_call_span(
    call: "ModelCall",
    *,
    parent: Any,
    stage: str,
    cost: Decimal | None = None,
    currency: str = "",
    cost_source: str = "",
) -> None:
    """A model call's span, made once it is recorded, under ``parent`` (the context it was
    made in, ``current_context()``): OpenTelemetry's GenAI attributes (the provider as
    ``gen_ai.system``, the model, the tokens), and the cost the call was priced at."""
    if _tracer is None or parent is None:
        return
    from opentelemetry.trace import SpanKind

    provider, _, model = call.model_id.partition("/")  # "demo" has no provider part
    attributes: dict[str, Any] = {
        "gen_ai.operation.name": "chat",
        "gen_ai.system": provider,
        "gen_ai.provider.name": provider,
        "gen_ai.request.model": model or call.model_id,
        STAGE: stage,
    }
    for key in ("input_tokens", "output_tokens"):
        if isinstance(call.usage.get(key), int):
            attributes[f"gen_ai.usage.{key}"] = call.usage[key]
    if cost is not None:
        # Exact, as stored (a float would round it).
        attributes.update({COST: str(cost), COST_CURRENCY: currency})
    if cost_source:
        attributes[COST_SOURCE] = cost_source
    seconds = call.usage.get("time")
    ended = call.ended_ns
    started = ended - int(seconds * 1e9) if isinstance(seconds, int | float) else ended
    span = _tracer.start_span(
        f"chat {attributes['gen_ai.request.model']}",
        context=parent,
        kind=SpanKind.CLIENT,
        attributes=attributes,
        start_time=started,
    )
    span.end(end_time=ended)


def agent_middlewares() -> list[Any]:
    """What a traced worker gives its agents: AgentScope's tracing of their replies and
    tool calls (its model calls' spans are ``model_call_span``'s, priced); none when off."""
    if _tracer is None:
        return []
    return [_tracing_middleware()()]


@cache
def _tracing_middleware() -> type:
    from agentscope.middleware import MiddlewareBase, TracingMiddleware

    class RunTracingMiddleware(TracingMiddleware):
        # Not a hook of this middleware: each model call's span is made from its record.
        on_model_call = MiddlewareBase.on_model_call

    return RunTracingMiddleware
