"""/metrics: who may read it, what the web processes and a worker's exporter report
(docs/operations.md, "Metrics")."""

import socket
import time
import urllib.error
import urllib.request
import uuid
from typing import Any

import httpx
import pytest
from django.test import Client

from agent_runs.metrics import metrics_server_start
from agent_runs.models import Run, WorkerBeat
from billing.models import UsageRecord
from tests.conftest import (
    DEMO,
    fake_model_env,
    free_port,
    post_run,
    run_input,
    serving,
    start_worker,
    stop_process,
    wait_for,
)
from tests.fake_llm import FakeOpenAI
from tests.ops.metrics_text import families, value

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.usefixtures("no_beats")]

# What only a worker measures (its jobs, the model calls they record), and only the web.
WORKER_ONLY = {
    "agent_runs_finished",
    "agent_run_duration_seconds",
    "agent_run_queue_wait_seconds",
    "agent_run_time_to_first_token_seconds",
    "agent_model_calls",
    "agent_model_tokens",
    "agent_model_cost",
    "agent_model_call_latency_seconds",
}
WEB_ONLY = {"http_requests", "http_request_duration_seconds"}


def scrape(client: Client, **extra: Any) -> Any:
    return client.get("/metrics", **extra)


def test_with_no_token_and_no_allow_list_only_loopback_may_read(client: Client) -> None:
    assert scrape(client, REMOTE_ADDR="127.0.0.1").status_code == 200
    assert scrape(client, REMOTE_ADDR="::1").status_code == 200
    refused = scrape(client, REMOTE_ADDR="10.0.0.5")
    assert refused.status_code == 403
    assert b"agent_" not in refused.content


def test_a_token_is_asked_for_from_any_address(client: Client, settings: Any) -> None:
    settings.METRICS_TOKEN = "s3cret-metrics"
    missing = scrape(client, REMOTE_ADDR="127.0.0.1")
    assert missing.status_code == 401
    assert missing["WWW-Authenticate"] == "Bearer"
    wrong = scrape(client, REMOTE_ADDR="10.0.0.5", HTTP_AUTHORIZATION="Bearer nope")
    assert wrong.status_code == 401
    right = scrape(client, REMOTE_ADDR="10.0.0.5", HTTP_AUTHORIZATION="Bearer s3cret-metrics")
    assert right.status_code == 200
    assert right["Content-Type"].startswith("text/plain; version=")


def test_an_allow_list_refuses_other_addresses_even_loopback(client: Client, settings: Any) -> None:
    settings.METRICS_ALLOWED_IPS = ["10.1.0.0/16", "fd00::/8"]
    assert scrape(client, REMOTE_ADDR="10.1.2.3").status_code == 200
    assert scrape(client, REMOTE_ADDR="fd00::7").status_code == 200
    assert scrape(client, REMOTE_ADDR="10.2.0.1").status_code == 403
    assert scrape(client, REMOTE_ADDR="127.0.0.1").status_code == 403


def test_with_both_the_address_and_the_token_are_asked_for(client: Client, settings: Any) -> None:
    settings.METRICS_ALLOWED_IPS = ["10.1.0.0/16"]
    settings.METRICS_TOKEN = "s3cret-metrics"
    token = {"HTTP_AUTHORIZATION": "Bearer s3cret-metrics"}
    assert scrape(client, REMOTE_ADDR="10.1.2.3").status_code == 401
    assert scrape(client, REMOTE_ADDR="10.1.2.3", **token).status_code == 200
    assert scrape(client, REMOTE_ADDR="10.9.9.9", **token).status_code == 403


def test_requests_are_counted_by_route_pattern_method_and_status(
    client: Client, alice_token: str
) -> None:
    thread = uuid.uuid4()
    route = "/api/v1/agent/threads/<uuid:thread_id>"
    labels = {"route": route, "method": "GET", "status": "404"}
    before = value(scrape(client).content.decode(), "http_requests_total", **labels) or 0
    auth = {"Authorization": f"Bearer {alice_token}"}
    assert client.get(f"/api/v1/agent/threads/{thread}", headers=auth).status_code == 404
    assert client.get(f"/api/v1/agent/threads/{uuid.uuid4()}", headers=auth).status_code == 404
    assert client.get("/no/such/page").status_code == 404
    text = scrape(client).content.decode()
    assert value(text, "http_requests_total", **labels) == before + 2
    assert value(text, "http_requests_total", route="unmatched", method="GET", status="404")
    # one series per pattern, not per thread id
    assert str(thread) not in text
    count = value(text, "http_request_duration_seconds_count", route=route, method="GET")
    assert count is not None and count >= 2


def test_the_web_reports_the_fleet_s_runs_and_queue(
    client: Client, alice: Any, redis_queue: Any
) -> None:
    # No worker: the run waits in the queue.
    assert post_run(alice, run_input()).status_code == 202
    time.sleep(0.05)
    text = scrape(client).content.decode()
    assert value(text, "agent_runs_active", status="queued") == 1
    assert value(text, "agent_runs_active", status="running") == 0
    assert value(text, "agent_runs_queue_depth") == 1
    oldest = value(text, "agent_runs_oldest_queued_seconds")
    assert oldest is not None and oldest > 0
    assert value(text, "agent_workers_beating") == 0


def test_the_web_does_not_list_what_only_workers_measure(client: Client) -> None:
    listed = families(scrape(client).content.decode())

    assert not listed & WORKER_ONLY
    assert listed >= WEB_ONLY
    assert {"agent_runs_active", "agent_run_events_emitted", "process_cpu_seconds"} <= listed


def test_a_worker_s_exporter_lists_what_workers_measure_and_not_the_web_s() -> None:
    port = free_port()
    server = metrics_server_start(host="127.0.0.1", port=port, token="", allowed=[])
    try:
        status, text = get(f"http://127.0.0.1:{port}/metrics")
    finally:
        server.shutdown()
        server.server_close()

    assert status == 200
    listed = families(text)
    assert listed >= WORKER_ONLY
    assert not listed & WEB_ONLY
    assert {"agent_run_events_emitted", "process_cpu_seconds"} <= listed
    assert "agent_runs_active" not in listed  # the fleet's figures are the web's


def get(url: str, token: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_a_run_through_a_real_worker_shows_in_the_web_s_and_the_worker_s_metrics(
    alice_token: str, redis_queue: Any
) -> None:
    token = "s3cret-metrics"
    worker_port = free_port()
    with FakeOpenAI() as fake:
        fake.usage = {**fake.usage, "cost": 0.0012}
        env = {
            **fake_model_env(fake),
            "WORKER_METRICS_PORT": str(worker_port),
            "METRICS_TOKEN": token,
        }
        with serving(**env) as port:
            body = run_input()
            posted = httpx.post(
                f"http://127.0.0.1:{port}/api/v1/agent/runs",
                json=body,
                headers={"Authorization": f"Bearer {alice_token}"},
            )
            assert posted.status_code == 202, posted.text
            wait_for(
                lambda: Run.objects.filter(run_id=body["runId"], status="completed").exists(),
                seconds=60,
            )
            calls = UsageRecord.objects.filter(run__run_id=body["runId"])
            assert calls.count() == 2  # the router's and the worker's

            web_metrics = f"http://127.0.0.1:{port}/metrics"
            assert get(web_metrics)[0] == 401
            status, web = get(web_metrics, token)
            assert status == 200
            assert value(web, "agent_runs_active", status="completed") is None  # active only
            assert value(web, "agent_runs_active", status="running") == 0
            assert value(web, "agent_runs_queue_depth") == 0
            assert value(web, "agent_workers_beating") == 1
            route = {"route": "/api/v1/agent/runs", "method": "POST", "status": "202"}
            assert value(web, "http_requests_total", **route) == 1
            assert not families(web) & WORKER_ONLY

            worker_metrics = f"http://127.0.0.1:{worker_port}/metrics"
            assert get(worker_metrics)[0] == 401
            assert get(worker_metrics, "wrong")[0] == 401
            status, worker = get(worker_metrics, token)
    assert status == 200
    assert value(worker, "agent_runs_finished_total", status="completed") == 1
    assert value(worker, "agent_run_duration_seconds_count", status="completed") == 1
    assert value(worker, "agent_run_queue_wait_seconds_count") == 1
    assert value(worker, "agent_run_time_to_first_token_seconds_count") == 1
    ttft = value(worker, "agent_run_time_to_first_token_seconds_sum")
    duration = value(worker, "agent_run_duration_seconds_sum", status="completed")
    assert ttft is not None and duration is not None and 0 < ttft < duration + 1
    assert value(worker, "agent_run_events_emitted_total", type="RUN_STARTED") == 1
    assert value(worker, "agent_run_events_emitted_total", type="RUN_FINISHED") == 1
    content = value(worker, "agent_run_events_emitted_total", type="TEXT_MESSAGE_CONTENT")
    assert content is not None and content >= 1
    model = "openai/gpt-test"
    assert value(worker, "agent_model_calls_total", model=model) == 2
    assert value(worker, "agent_model_tokens_total", model=model, kind="input") == 22
    assert value(worker, "agent_model_tokens_total", model=model, kind="output") == 10
    cost = value(worker, "agent_model_cost_total", model=model, currency="USD")
    assert cost == pytest.approx(0.0024)
    assert value(worker, "agent_model_call_latency_seconds_count", model=model) == 2
    # the worker serves no HTTP: it lists no HTTP metrics, and it runs no fleet queries
    assert not families(worker) & WEB_ONLY
    assert value(worker, "agent_runs_queue_depth") is None


def test_a_worker_whose_metrics_port_is_taken_still_runs(redis_queue: Any) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        worker = start_worker(**DEMO, WORKER_METRICS_PORT=str(port))
        try:
            wait_for(lambda: WorkerBeat.objects.exists(), seconds=30)
            assert worker.poll() is None
        finally:
            stop_process(worker)
