"""Operations (ops/; docs/operations.md): worker beats, /readyz, /metrics, logs, tracing."""

import ipaddress

from django.core.exceptions import ImproperlyConfigured

from config.env import env_float, env_int, env_list, env_str
from config.settings.base import DEBUG

# Each worker upserts its row (agent_runs.WorkerBeat) this often; /readyz counts the workers
# whose row is newer than WORKER_STALE_SECONDS.
WORKER_BEAT_SECONDS = env_int("WORKER_BEAT_SECONDS", 5, minimum=1)
WORKER_STALE_SECONDS = env_int("WORKER_STALE_SECONDS", 30, minimum=2)
if WORKER_BEAT_SECONDS >= WORKER_STALE_SECONDS:
    raise ImproperlyConfigured("WORKER_BEAT_SECONDS must be shorter than WORKER_STALE_SECONDS")
# /readyz fails when more jobs than this wait in the runs queue.
READYZ_MAX_QUEUE_DEPTH = env_int("READYZ_MAX_QUEUE_DEPTH", 1000, minimum=0)
# How long /readyz waits for Redis (connect and answer) before it calls it down.
READYZ_TIMEOUT_SECONDS = env_float("READYZ_TIMEOUT_SECONDS", 1.0, minimum=0.05)
# Who may read /metrics (and a worker's WORKER_METRICS_PORT): the bearer token when set, from
# the addresses (CIDRs, comma-separated) when set; with neither, loopback only.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
METRICS_ALLOWED_IPS = env_list("METRICS_ALLOWED_IPS", [])
for _cidr in METRICS_ALLOWED_IPS:
    try:
        ipaddress.ip_network(_cidr, strict=False)
    except ValueError as _exc:
        raise ImproperlyConfigured(f"METRICS_ALLOWED_IPS: {_cidr!r} is not a CIDR") from _exc
# 0: off; else each worker serves its metrics at http://WORKER_METRICS_HOST:PORT/metrics.
WORKER_METRICS_PORT = env_int("WORKER_METRICS_PORT", 0, minimum=0)
WORKER_METRICS_HOST = env_str("WORKER_METRICS_HOST", "0.0.0.0")
# "json" (one JSON object a line, for log collectors) or "text" (for people).
LOG_FORMAT = env_str("LOG_FORMAT", "text" if DEBUG else "json").strip().lower()
if LOG_FORMAT not in ("json", "text"):
    raise ImproperlyConfigured(f"LOG_FORMAT must be json or text, got {LOG_FORMAT!r}")
# Tracing (docs/operations.md, "Tracing"): set, every run is a trace, sent over OTLP/HTTP to
# this collector by daphne and the workers; unset, nothing of OpenTelemetry's SDK is loaded.
# The SDK reads its other OTEL_* variables itself (service name, headers, traces endpoint).
OTEL_EXPORTER_OTLP_ENDPOINT = env_str("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()

# Every line of a run's job names the run (run_id, thread_id): ops/logging.py.
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"run_context": {"()": "ops.logging.RunContextFilter"}},
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(levelname)s %(name)s %(process)d %(message)s",
            "rename_fields": {"levelname": "level", "name": "logger"},
            "timestamp": "time",  # ISO 8601, UTC
        },
        "text": {"()": "ops.logging.TextFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "filters": ["run_context"],
            "formatter": LOG_FORMAT,
        }
    },
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # Django's own loggers propagate to the root handler instead of printing twice.
    "loggers": {
        "django": {"handlers": [], "propagate": True},
        # The MCP client's HTTP library logs each request (several a tool call) at INFO.
        "httpx2": {"level": "WARNING"},
    },
}
