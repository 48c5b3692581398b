"""Tracing with OpenTelemetry (docs/operations.md, "Tracing"), process-wide: off unless
``OTEL_EXPORTER_OTLP_ENDPOINT`` is set.

Set, a process that calls ``tracing_start`` sends its spans to that collector over OTLP/HTTP
(the SDK's ``BatchSpanProcessor`` and ``OTLPSpanExporter``, which read the SDK's other
``OTEL_*`` variables themselves): daphne traces its requests (OpenTelemetry's Django
instrumentation), a worker its runs (agent_runs/runtime/tracing.py). Unset, nothing here
imports OpenTelemetry: every import of it is inside a function that is called only when the
variable is set.
"""

import os
import threading
from typing import Any

from django.conf import settings

# The request that made a run: its W3C trace context, kept in ``Run.request`` under this key,
# which the run's trace links to.
RUN_TRACE_CONTEXT_KEY = "trace_context"
# Requests that are not worth a trace (probes and scrapes), unless the variable of
# OpenTelemetry's Django instrumentation says otherwise.
_UNTRACED_URLS = "healthz,readyz,metrics"

_started = threading.Lock()
_provider: Any = None


def tracing_on() -> bool:
    return bool(settings.OTEL_EXPORTER_OTLP_ENDPOINT)


def tracing_start(*, service_name: str, django_requests: bool = False) -> bool:
    """Send this process's spans to the collector (once per process; ``OTEL_SERVICE_NAME``
    names the service when set); with ``django_requests``, each Django request is a span
    (call it before the request handler loads its middleware). Whether tracing is on."""
    global _provider
    if not tracing_on():
        return False
    with _started:
        if _provider is not None:
            return True
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import SERVICE_NAME, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        name = os.environ.get("OTEL_SERVICE_NAME") or service_name
        provider = TracerProvider(resource=Resource.create({SERVICE_NAME: name}))
        provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
        trace.set_tracer_provider(provider)
        _provider = provider
    if django_requests:
        from opentelemetry.instrumentation.django import DjangoInstrumentor

        excluded = os.environ.get("OTEL_PYTHON_DJANGO_EXCLUDED_URLS", _UNTRACED_URLS)
        DjangoInstrumentor().instrument(tracer_provider=provider, excluded_urls=excluded)
    return True


def tracing_flush(timeout_seconds: float = 10.0) -> None:
    """Send the spans not sent yet (a worker that stops)."""
    if _provider is not None:
        _provider.force_flush(timeout_millis=int(timeout_seconds * 1000))


def trace_context() -> dict[str, str]:
    """The current span's W3C trace context (``traceparent``, and ``tracestate`` when it has
    one); empty when tracing is off or no span is current."""
    if not tracing_on():
        return {}
    from opentelemetry.propagate import inject

    carrier: dict[str, str] = {}
    inject(carrier)
    return carrier


def with_trace_context(request: dict[str, Any]) -> dict[str, Any]:
    """A run's ``Run.request`` as the current request makes it: with this request's trace
    context (``RUN_TRACE_CONTEXT_KEY``) when tracing is on, and no other's (a run that goes
    on from another is made by a request of its own)."""
    kept = {key: value for key, value in request.items() if key != RUN_TRACE_CONTEXT_KEY}
    context = trace_context()
    return {**kept, RUN_TRACE_CONTEXT_KEY: context} if context else kept
