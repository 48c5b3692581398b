"""Every run a trace (docs/operations.md, "Tracing"): daphne and a real worker, told where a
collector is (``OTEL_EXPORTER_OTLP_ENDPOINT``), send the spans of a run to it over OTLP/HTTP,
the request that made the run linked from the run's trace; unset, a worker loads nothing of
OpenTelemetry's SDK beyond what redis-py loads for itself."""

import json
import threading
from collections.abc import Iterator
from decimal import Decimal
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from django.conf import settings
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue
from rest_framework.test import APIClient

from agent_runs.models import Run
from billing.models import UsageRecord
from tests.agent_runs.runtime.test_lazy_imports import probe
from tests.billing.conftest import price_entry
from tests.conftest import DEMO, fake_model_env, post_run, run_input, serving, wait_for
from tests.fake_llm import FakeOpenAI

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.integration]


class OtlpReceiver:
    """A collector on loopback: takes OTLP/HTTP trace exports (protobuf) and keeps their
    spans, each as a dict (name, ids, attributes, links, service)."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.paths: set[str] = set()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                receiver.paths.add(self.path)
                receiver.spans.extend(_spans(request))
                answer = ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.endpoint = f"http://127.0.0.1:{self.server.server_address[1]}"

    def __enter__(self) -> "OtlpReceiver":
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.server.shutdown()
        self.server.server_close()

    def named(self, name: str) -> list[dict[str, Any]]:
        return [span for span in self.spans if span["name"] == name]


def _spans(request: ExportTraceServiceRequest) -> Iterator[dict[str, Any]]:
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                yield {
                    "name": span.name,
                    "service": resource.get("service.name"),
                    "scope": scope_spans.scope.name,
                    "trace_id": span.trace_id.hex(),
                    "span_id": span.span_id.hex(),
                    "parent_id": span.parent_span_id.hex(),
                    "start": span.start_time_unix_nano,
                    "end": span.end_time_unix_nano,
                    "attributes": _attributes(span.attributes),
                    "links": [
                        (link.trace_id.hex(), link.span_id.hex(), _attributes(link.attributes))
                        for link in span.links
                    ],
                }


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs}


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(item) for item in value.array_value.values]
    return getattr(value, kind) if kind else None


CLIENT_TRACE_ID, CLIENT_SPAN_ID = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
CLIENT_SPAN = f"00-{CLIENT_TRACE_ID}-{CLIENT_SPAN_ID}-01"


def test_a_run_is_a_trace_of_its_stages_model_calls_and_tool_call_linked_to_its_request(
    alice_token: str, redis_queue: Any
) -> None:
    price_entry("openai/gpt-test", (None, "0.000001", "0.000002", None))
    with OtlpReceiver() as collector, FakeOpenAI() as fake:
        fake.tool_call_turns = [[("call_1", "calendar_list", '{"days": 3}')]]
        env = {
            **fake_model_env(fake),
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",  # milliseconds between the exports
        }
        with serving(**env) as port:
            body = run_input()
            posted = httpx.post(
                f"http://127.0.0.1:{port}/api/v1/agent/runs",
                json=body,
                # The client's own trace, which the request joins.
                headers={"Authorization": f"Bearer {alice_token}", "traceparent": CLIENT_SPAN},
                timeout=30,
            )
            assert posted.status_code == 202, posted.text
            wait_for(
                lambda: Run.objects.filter(run_id=body["runId"], status="completed").exists(),
                seconds=90,
            )
            # The worker exports the run's span as the run ends, after its children.
            wait_for(lambda: collector.named("agent_run"), seconds=30)
            wait_for(lambda: _request_spans(collector), seconds=30)
    run = Run.objects.get(run_id=body["runId"])
    assert collector.paths == {"/v1/traces"}

    [request] = _request_spans(collector)
    assert request["service"] == "agent-run-server"
    assert (request["trace_id"], request["parent_id"]) == (CLIENT_TRACE_ID, CLIENT_SPAN_ID)
    method = request["attributes"].get(
        "http.request.method", request["attributes"].get("http.method")
    )
    assert method == "POST"

    [run_span] = collector.named("agent_run")
    assert run_span["service"] == "agent-run-worker"
    assert run_span["parent_id"] == ""  # a trace of its own
    assert run_span["trace_id"] != request["trace_id"]
    assert [link[:2] for link in run_span["links"]] == [(request["trace_id"], request["span_id"])]
    ids = {
        "agent_run.run_id": run.run_id,
        "agent_run.thread_id": str(run.thread_id),
        "gen_ai.conversation.id": str(run.thread_id),
    }
    assert run_span["attributes"] == {
        **ids,
        "messaging.system": "rq",
        "messaging.message.id": str(run.task_id),
        "agent_run.status": "completed",
    }

    trace = [span for span in collector.spans if span["trace_id"] == run_span["trace_id"]]
    for span in trace:  # every span of the run names it
        assert {key: span["attributes"].get(key) for key in ids} == ids, span["name"]
    stages = {span["name"]: span for span in trace if span["name"].startswith("stage ")}
    assert set(stages) == {"stage router", "stage worker", "stage memory"}
    assert {span["parent_id"] for span in stages.values()} == {run_span["span_id"]}

    calls = [span for span in trace if span["name"] == "chat gpt-test"]
    assert len(calls) == 3  # the router's, the worker's tool call, its answer
    stage_of = {span["span_id"]: name.removeprefix("stage ") for name, span in stages.items()}
    assert sorted(stage_of[span["parent_id"]] for span in calls) == ["router", "worker", "worker"]
    records = {(r.cost, r.cost_source) for r in UsageRecord.objects.filter(run=run)}
    cost = Decimal("11") * Decimal("0.000001") + Decimal("5") * Decimal("0.000002")
    assert records == {(cost, "catalog_fallback")}  # the provider gave no cost
    for call in calls:
        attributes = call["attributes"]
        assert attributes["gen_ai.system"] == "openai"
        assert attributes["gen_ai.request.model"] == "gpt-test"
        assert attributes["gen_ai.operation.name"] == "chat"
        assert attributes["gen_ai.usage.input_tokens"] == 11
        assert attributes["gen_ai.usage.output_tokens"] == 5
        assert Decimal(attributes["gen_ai.usage.cost"]) == cost
        assert attributes["gen_ai.usage.cost_currency"] == "USD"
        assert attributes["gen_ai.usage.cost_source"] == "catalog_fallback"
        assert call["start"] <= call["end"]
        assert run_span["start"] <= call["start"] and call["end"] <= run_span["end"]

    tools = [span for span in trace if span["attributes"].get("gen_ai.tool.name")]
    [tool] = [span for span in tools if span["attributes"]["gen_ai.tool.name"] == "calendar_list"]
    assert tool["attributes"]["gen_ai.tool.call.id"] == "call_1"
    assert json.loads(tool["attributes"]["gen_ai.tool.call.arguments"]) == {"days": 3}
    assert tool["scope"] == "agentscope"
    # Under AgentScope's span of the worker agent's reply, under the worker stage.
    spans = {span["span_id"]: span for span in trace}
    chain, parent_id = [], tool["parent_id"]
    while parent_id:
        chain.append(spans[parent_id]["name"])
        parent_id = spans[parent_id]["parent_id"]
    assert chain == ["invoke_agent worker", "stage worker", "agent_run"]


def _request_spans(collector: OtlpReceiver) -> list[dict[str, Any]]:
    return [
        span
        for span in collector.spans
        if span["service"] == "agent-run-server" and "/api/v1/agent/runs" in json.dumps(span)
    ]


WORKER_WITHOUT_TRACING = """
import json, sys
import django
django.setup()
import redis  # what redis-py loads of OpenTelemetry for itself, whoever else does
redis_own = sorted(name for name in sys.modules if name.startswith("opentelemetry.sdk"))
from django.core.management import call_command
call_command("rqworker", sys.argv[1], burst=True)
loaded = sorted(name for name in sys.modules if name.startswith("opentelemetry.sdk"))
print(json.dumps({
    "sdk_beyond_redis": sorted(set(loaded) - set(redis_own)),
    "tracing": sorted(
        name for name in sys.modules
        if name.startswith(("opentelemetry.sdk.trace", "opentelemetry.exporter",
                            "opentelemetry.instrumentation", "agentscope.middleware"))
    ),
}))
"""


def test_with_the_variable_unset_a_worker_runs_a_run_and_loads_nothing_of_the_sdk(
    alice: APIClient, redis_queue: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in DEMO.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    body = run_input()
    assert post_run(alice, body).status_code == 202

    loaded = probe(WORKER_WITHOUT_TRACING, settings.AGENT_RUNS_QUEUE)

    run = Run.objects.get(run_id=body["runId"])
    assert run.status == Run.Status.COMPLETED, run.error
    assert "trace_context" not in run.request
    assert loaded == {"sdk_beyond_redis": [], "tracing": []}


def test_runs_that_one_worker_holds_at_once_are_traces_that_never_mix(
    alice_token: str, redis_queue: Any
) -> None:
    with OtlpReceiver() as collector, FakeOpenAI() as fake:
        fake.delay = 0.5  # each model call: both runs are in the middle of theirs together
        env = {
            **fake_model_env(fake),
            "OTEL_EXPORTER_OTLP_ENDPOINT": collector.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        }
        with serving(**env) as port:
            bodies = [run_input(), run_input()]
            for body in bodies:
                posted = httpx.post(
                    f"http://127.0.0.1:{port}/api/v1/agent/runs",
                    json=body,
                    headers={"Authorization": f"Bearer {alice_token}"},
                    timeout=30,
                )
                assert posted.status_code == 202, posted.text
            run_ids = [body["runId"] for body in bodies]
            wait_for(
                lambda: Run.objects.filter(run_id__in=run_ids, status="completed").count() == 2,
                seconds=90,
            )
            wait_for(lambda: len(collector.named("agent_run")) == 2, seconds=30)
            wait_for(lambda: len(collector.named("chat gpt-test")) == 4, seconds=30)
    first, second = sorted(collector.named("agent_run"), key=lambda span: span["start"])
    assert second["start"] < first["end"]  # at once, on the worker's one loop
    assert first["trace_id"] != second["trace_id"]
    for run_span in (first, second):
        run_id = run_span["attributes"]["agent_run.run_id"]
        trace = [span for span in collector.spans if span["trace_id"] == run_span["trace_id"]]
        assert {span["attributes"]["agent_run.run_id"] for span in trace} == {run_id}
        spans = {span["span_id"]: span for span in trace}
        for span in trace:  # each span's parent is in its own run's trace
            assert span is run_span or span["parent_id"] in spans, span["name"]
        stage_parents = {span["parent_id"] for span in trace if span["name"].startswith("stage ")}
        assert stage_parents == {run_span["span_id"]}
        calls = sorted(
            (span for span in trace if span["name"] == "chat gpt-test"),
            key=lambda span: span["start"],
        )
        assert [spans[call["parent_id"]]["name"] for call in calls] == [
            "stage router",
            "stage worker",
        ]
    assert sorted(span["attributes"]["agent_run.run_id"] for span in (first, second)) == sorted(
        run_ids
    )


def test_with_the_variable_unset_daphne_s_application_loads_nothing_of_the_tracing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("OTEL_EXPORTER_OTLP_ENDPOINT", raising=False)
    code = (
        "import json, sys\n"
        "import config.asgi\n"
        "print(json.dumps(sorted(name for name in sys.modules if name.startswith(("
        "'opentelemetry.sdk.trace', 'opentelemetry.exporter', 'opentelemetry.instrumentation'"
        ")))))\n"
    )
    assert probe(code) == []
