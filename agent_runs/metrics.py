"""Prometheus metrics that each process keeps for itself (docs/operations.md, "Metrics"):
incremented where things happen (the emitter, the job, the usage records, the HTTP
middleware), served by the web processes at ``/metrics`` and by a worker on
``WORKER_METRICS_PORT`` (``metrics_server_start``). Each process serves only what its role
measures: a run's and a model call's figures are the worker's, the HTTP ones the web's, so
neither lists the other's at zero forever.

Figures for the whole fleet (runs by status, the queue) are read from PostgreSQL and Redis
when scraped, by ``ops.collectors``. This module imports ``prometheus_client`` and the
standard library only, so that the core may import it.
"""

import hmac
import ipaddress
import threading
from collections.abc import Sequence
from functools import cache
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
)

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
ProcessRole = Literal["web", "worker"]

# The metrics of one role. Every process serves the default registry too: prometheus_client's
# process_* and python_*, and what both roles measure.
WORKER_REGISTRY = CollectorRegistry()
WEB_REGISTRY = CollectorRegistry()
_ROLE_REGISTRIES: dict[ProcessRole, CollectorRegistry] = {
    "web": WEB_REGISTRY,
    "worker": WORKER_REGISTRY,
}

# --- the runs' events (both: a job's, and the journal end a web process writes for a run
# cancelled outside its job) ---
EVENTS_EMITTED = Counter(
    "agent_run_events_emitted", "AG-UI events a run's emitter wrote, by type.", ["type"]
)


@cache
def events_emitted(event_type: str) -> Any:
    """``EVENTS_EMITTED``'s counter of one event type, looked up once per type (the label
    lookup takes a lock and builds a key: it was 1% of a worker's CPU, once per event)."""
    return EVENTS_EMITTED.labels(event_type)


# --- the runs (the worker: its jobs) ---
RUNS_FINISHED = Counter(
    "agent_runs_finished",
    "Runs a job ended, by final status.",
    ["status"],
    registry=WORKER_REGISTRY,
)
RUN_DURATION = Histogram(
    "agent_run_duration_seconds",
    "From a run's claim (started_at) to its end, by final status.",
    ["status"],
    buckets=(0.5, 1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600),
    registry=WORKER_REGISTRY,
)
RUN_QUEUE_WAIT = Histogram(
    "agent_run_queue_wait_seconds",
    "From a run's creation to its claim by a worker.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
    registry=WORKER_REGISTRY,
)
RUN_TIME_TO_FIRST_TOKEN = Histogram(
    "agent_run_time_to_first_token_seconds",
    "From a run's RUN_STARTED to its first TEXT_MESSAGE_CONTENT.",
    buckets=(0.1, 0.25, 0.5, 1, 2, 3, 5, 10, 20, 30, 60),
    registry=WORKER_REGISTRY,
)

# --- the model calls (the worker, where their usage is recorded) ---
MODEL_CALLS = Counter(
    "agent_model_calls", "Model calls recorded, by model.", ["model"], registry=WORKER_REGISTRY
)
MODEL_TOKENS = Counter(
    "agent_model_tokens",
    "Tokens of the recorded model calls, by model and kind (input, output).",
    ["model", "kind"],
    registry=WORKER_REGISTRY,
)
MODEL_COST = Counter(
    "agent_model_cost",
    "Cost of the recorded model calls whose cost is known, by model and currency (a float "
    "here; the usage records keep exact decimals).",
    ["model", "currency"],
    registry=WORKER_REGISTRY,
)
MODEL_CALL_LATENCY = Histogram(
    "agent_model_call_latency_seconds",
    "Latency of the recorded model calls, by model.",
    ["model"],
    buckets=(0.25, 0.5, 1, 2, 5, 10, 20, 30, 60, 120),
    registry=WORKER_REGISTRY,
)

# --- Rate limits (the web processes; agent_runs/services/rate_limits.py) ---
RATE_LIMITER_UNAVAILABLE = Counter(
    "rate_limiter_unavailable",
    "Runs taken without counting them in RATE_LIMIT_RUNS's window: Redis was unreachable.",
    registry=WEB_REGISTRY,
)

# --- HTTP (the web processes; ops.middleware) ---
HTTP_REQUESTS = Counter(
    "http_requests",
    "HTTP requests answered by Django, by route pattern, method and status.",
    ["route", "method", "status"],
    registry=WEB_REGISTRY,
)
HTTP_REQUEST_DURATION = Histogram(
    "http_request_duration_seconds",
    "Time until the response (a streamed one's headers), by route pattern and method.",
    ["route", "method"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
    registry=WEB_REGISTRY,
)


def metrics_networks(cidrs: Sequence[str]) -> list[IPNetwork]:
    """``METRICS_ALLOWED_IPS`` read (``ValueError`` on an address that is not one)."""
    return [ipaddress.ip_network(cidr, strict=False) for cidr in cidrs]


def metrics_access(
    *,
    remote_addr: str,
    authorization: str | None,
    token: str,
    allowed: Sequence[IPNetwork],
) -> int:
    """Who may read the metrics, as an HTTP status: 200, 403 (an address not allowed) or
    401 (a token asked for and not given). An address must be in ``allowed`` when it is set,
    and the bearer ``token`` is required when it is set; with neither, loopback only."""
    try:
        address = ipaddress.ip_address(remote_addr)
    except ValueError:
        return 403
    if allowed:
        if not any(address in network for network in allowed):
            return 403
    elif not token and not address.is_loopback:
        return 403
    if token:
        scheme, _, given = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(given.strip(), token):
            return 401
    return 200


def metrics_text(*, role: ProcessRole) -> tuple[bytes, str]:
    """This process's metrics in the text exposition format (every process's, and those of
    its ``role``), and its content type."""
    return generate_latest(REGISTRY) + generate_latest(_ROLE_REGISTRIES[role]), CONTENT_TYPE_LATEST


class _MetricsHandler(BaseHTTPRequestHandler):
    """``GET`` of a worker's metrics, by the ``token`` and ``allowed`` of its subclass."""

    token: str = ""
    allowed: Sequence[IPNetwork] = ()

    def do_GET(self) -> None:
        status = metrics_access(
            remote_addr=self.client_address[0],
            authorization=self.headers.get("Authorization"),
            token=self.token,
            allowed=self.allowed,
        )
        body, content_type = (
            metrics_text(role="worker") if status == 200 else (b"forbidden\n", "text/plain")
        )
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if status == 401:
            self.send_header("WWW-Authenticate", "Bearer")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass  # a scrape every few seconds is not worth a log line


def metrics_server_start(
    *, host: str, port: int, token: str, allowed: Sequence[IPNetwork]
) -> ThreadingHTTPServer:
    """Serve this process's metrics on ``host:port`` from a daemon thread (a worker, which
    serves no HTTP otherwise), under the same rule as the web's ``/metrics``."""

    class Handler(_MetricsHandler):
        pass

    Handler.token, Handler.allowed = token, allowed
    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="metrics-server", daemon=True).start()
    return server
