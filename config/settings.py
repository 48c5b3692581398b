"""Settings, read from the environment (every variable is listed in docs/configuration.md,
which a test keeps complete)."""

import ipaddress
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured

from config.env import (
    env_bool,
    env_decimal,
    env_float,
    env_int,
    env_list,
    env_str,
    warn_once_per_start,
)

BASE_DIR = Path(__file__).resolve().parent.parent
# Where the quick start keeps its SQLite file and the embedded Redis socket.
LOCAL_DIR = Path(env_str("LOCAL_DATA_DIR") or BASE_DIR / ".local")

DEBUG = env_bool("DJANGO_DEBUG", False)

_secret_key = env_str("DJANGO_SECRET_KEY")
if not _secret_key:
    if not DEBUG:
        raise ImproperlyConfigured(
            "DJANGO_SECRET_KEY must be set (or DJANGO_DEBUG=true for local development)"
        )
    warn_once_per_start(
        "WARNING: DJANGO_SECRET_KEY is not set; using an insecure development key.",
        marker="DJANGO_INSECURE_KEY_WARNED",
    )
    _secret_key = "insecure-development-key-never-use-in-production"
SECRET_KEY = _secret_key

ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])
if env_bool("DJANGO_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SESSION_COOKIE_SECURE = not DEBUG
CSRF_COOKIE_SECURE = not DEBUG

# Not "daphne": its app installs Twisted's reactor in every process that loads the apps, the
# workers included (some 40 MiB each); daphne is started as a program (docs/deployment.md).
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI and Redoc as static files: the docs work offline
    "agent_runs",  # before django_rq: its rqworker command is the one that runs
    "django_rq",
    "history",
    "attachments",
    "billing",
    "console",
    "ops",
]

MIDDLEWARE = [
    # First, so that it times and counts every request, whatever answers it.
    "ops.middleware.HttpMetricsMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
ASGI_APPLICATION = "config.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# PostgreSQL in tests and production; SQLite only for the quick start.
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL") or f"sqlite:///{LOCAL_DIR / 'db.sqlite3'}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
        conn_health_checks=True,
    )
}
DATABASE_POOL_MAX_SIZE = env_int("DATABASE_POOL_MAX_SIZE", 10, minimum=0)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and DATABASE_POOL_MAX_SIZE:
    # Under ASGI every request runs its synchronous part in a thread of its own, so
    # per-thread persistent connections would mean a new connection per request: pool them.
    # Added to what DATABASE_URL's query string set (sslmode and the like), not instead of it.
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1,
        "max_size": DATABASE_POOL_MAX_SIZE,
        "timeout": 10,
    }
elif DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The quick start's SQLite is shared by daphne and the worker: wait for locks, take the
    # write lock up front, and let readers work beside a writer.
    DATABASES["default"]["OPTIONS"] = {
        "timeout": 20,
        "transaction_mode": "IMMEDIATE",
        "init_command": "PRAGMA journal_mode=WAL;",
    }
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# The quick start runs an embedded redis-server on this socket when REDIS_URL is unset.
EMBEDDED_REDIS_SOCKET = LOCAL_DIR / "redis.sock"
REDIS_URL = env_str("REDIS_URL") or f"unix://{EMBEDDED_REDIS_SOCKET}"

AGENT_RUNS_QUEUE = "runs"
AGENT_RUN_JOB_TIMEOUT = env_int("AGENT_RUN_JOB_TIMEOUT", 600, minimum=1)
# A running run whose job has not beaten for this long belongs to a dead worker;
# workers look for such runs this often.
AGENT_RUN_STALE_SECONDS = env_int("AGENT_RUN_STALE_SECONDS", 120, minimum=1)
AGENT_RUN_SWEEP_SECONDS = env_int("AGENT_RUN_SWEEP_SECONDS", 30, minimum=5)
# How often a worker renews the heartbeat of the job it runs.
AGENT_RUN_HEARTBEAT_SECONDS = env_int("AGENT_RUN_HEARTBEAT_SECONDS", 10, minimum=1)
if AGENT_RUN_HEARTBEAT_SECONDS >= AGENT_RUN_STALE_SECONDS:
    raise ImproperlyConfigured(
        "AGENT_RUN_HEARTBEAT_SECONDS must be shorter than AGENT_RUN_STALE_SECONDS, or every "
        "long run would look dead"
    )
# Automation jobs (docs/automations.md): a due time the workers' sweep reaches later than
# this is missed, and makes a run only for a job whose catch-up is ``once``.
AUTOMATION_MISSED_AFTER_SECONDS = env_int("AUTOMATION_MISSED_AFTER_SECONDS", 300, minimum=60)
RQ_QUEUES = {
    AGENT_RUNS_QUEUE: {"URL": REDIS_URL, "DEFAULT_TIMEOUT": AGENT_RUN_JOB_TIMEOUT},
}
# The worker runs jobs in its own process, warm (see agent_runs/runtime/worker.py).
RQ = {"WORKER_CLASS": "agent_runs.runtime.worker.RunWorker"}
# How many jobs (runs) one worker process holds at once, as tasks on its event loop, and
# how many threads do their database work (each keeps one connection from the pool: with
# the beats and the sweep, a worker holds at most WORKER_DB_THREADS + 4 connections,
# whatever its runs; DATABASE_POOL_MAX_SIZE must allow that).
WORKER_CONCURRENCY = env_int("WORKER_CONCURRENCY", 32, minimum=1)
WORKER_DB_THREADS = env_int("WORKER_DB_THREADS", 4, minimum=1)

# The web console (console/; docs/console.md). In development (DEBUG) an anonymous visitor
# from a loopback address is signed in as this user, whose API token the quick start prints.
CONSOLE_DEMO_USERNAME = env_str("CONSOLE_DEMO_USERNAME", "demo")

# --- operations (ops/; docs/operations.md) --------------------------------------------------
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
# --- end operations -------------------------------------------------------------------------

# Push notifications (webhooks; docs/push.md): delivered by the runs' workers.
# Push URLs on private, loopback, link-local or otherwise internal addresses are refused
# unless this is on (development, tests, a receiver on the server's own network).
PUSH_ALLOW_PRIVATE_URLS = env_bool("PUSH_ALLOW_PRIVATE_URLS", False)
# Attempts of one delivery before it is failed; retry n waits BASE * 2**(n-1) seconds.
PUSH_MAX_ATTEMPTS = env_int("PUSH_MAX_ATTEMPTS", 8, minimum=1)
PUSH_RETRY_BASE_SECONDS = env_float("PUSH_RETRY_BASE_SECONDS", 10.0, minimum=0)
PUSH_TIMEOUT_SECONDS = env_float("PUSH_TIMEOUT_SECONDS", 10.0, minimum=0.1)
# Receivers of agent_runs.signals.run_status_changed, by dotted path: a protocol edge's
# (e.g. its push notifications), connected in the web and the worker processes.
AGENT_RUN_STATUS_RECEIVERS: list[str] = ["agent_runs.protocols.a2a.receivers.on_run_status"]

# Models (docs/configuration.md, "Models"): "demo" runs offline with no key.
AGENT_WORKER_MODEL = env_str("AGENT_WORKER_MODEL", "demo")
# The router (and the memory stage) make small calls: a cheaper model may serve them.
AGENT_ROUTER_MODEL = env_str("AGENT_ROUTER_MODEL", AGENT_WORKER_MODEL)
AGENT_MEMORY_MODEL = env_str("AGENT_MEMORY_MODEL", AGENT_ROUTER_MODEL)
# Reason/act rounds of the worker in one run (the memory stage has three).
AGENT_WORKER_MAX_ITERS = env_int("AGENT_WORKER_MAX_ITERS", 6, minimum=1)
# How long a run's interrupt (a tool approval, a client tool's result) stays answerable;
# the sweeper then expires it, and its thread takes new messages again.
INTERRUPT_TTL_SECONDS = env_int("INTERRUPT_TTL_SECONDS", 86400, minimum=10)
# What a new run does on a busy thread when its request names no strategy (docs/protocols/
# multitask.md): "" keeps each entry point's own default; reject, enqueue, interrupt or
# rollback overrides it for all.
MULTITASK_DEFAULT = env_str("MULTITASK_DEFAULT", "").strip().lower()
if MULTITASK_DEFAULT not in ("", "reject", "enqueue", "interrupt", "rollback"):
    raise ImproperlyConfigured(
        "MULTITASK_DEFAULT must be reject, enqueue, interrupt or rollback, "
        f"got {MULTITASK_DEFAULT!r}"
    )
# Turn the worker model's thinking switch on (DeepSeek's `thinking`, DashScope's
# `enable_thinking`): its reasoning streams to the client. A model that always reasons
# (deepseek-reasoner) streams its reasoning whatever this says.
AGENT_WORKER_THINKING = env_bool("AGENT_WORKER_THINKING", False)
# What the memory stage keeps per user (the newest win).
AGENT_MEMORY_MAX_ITEMS = env_int("AGENT_MEMORY_MAX_ITEMS", 50, minimum=1)
# Tools and context per stage for chat runs (agent_runs/agent_config.py).
AGENT_SYSTEM_AGENTS_FILE = env_str(
    "AGENT_SYSTEM_AGENTS_FILE", str(BASE_DIR / "agent_runs" / "system_agents.yaml")
)
# MCP tool servers (docs/tools.md, "MCP tool servers"): how long one tool call may take,
# connecting included, before it fails as a tool error; how many calls (each its own
# connection) a worker process has open to one server at once, the others waiting their turn.
MCP_TOOL_TIMEOUT_SECONDS = env_float("MCP_TOOL_TIMEOUT_SECONDS", 30.0, minimum=0.1)
MCP_MAX_CONNECTIONS_PER_SERVER = env_int("MCP_MAX_CONNECTIONS_PER_SERVER", 8, minimum=1)
# How much of the thread's earlier conversation a stage reads, in (approximate) tokens.
AGENT_CONTEXT_TOKEN_BUDGET = env_int("AGENT_CONTEXT_TOKEN_BUDGET", 4000, minimum=0)
AGENT_MODEL_MAX_RETRIES = env_int("AGENT_MODEL_MAX_RETRIES", 2, minimum=0)
AGENT_MODEL_RETRY_DELAY_SECONDS = env_float("AGENT_MODEL_RETRY_DELAY_SECONDS", 1.0, minimum=0)
AGENT_MODEL_TIMEOUT_SECONDS = env_float("AGENT_MODEL_TIMEOUT_SECONDS", 120.0, minimum=1)
OPENAI_API_KEY = env_str("OPENAI_API_KEY", "")
OPENAI_BASE_URL = env_str("OPENAI_BASE_URL", "")
DEEPSEEK_API_KEY = env_str("DEEPSEEK_API_KEY", "")
DEEPSEEK_BASE_URL = env_str("DEEPSEEK_BASE_URL", "")  # empty: DeepSeek's own
DASHSCOPE_API_KEY = env_str("DASHSCOPE_API_KEY", "")
DASHSCOPE_BASE_URL = env_str("DASHSCOPE_BASE_URL", "")  # empty: DashScope's compatible mode
ANTHROPIC_API_KEY = env_str("ANTHROPIC_API_KEY", "")
ANTHROPIC_BASE_URL = env_str("ANTHROPIC_BASE_URL", "")  # empty: Anthropic's
GEMINI_API_KEY = env_str("GEMINI_API_KEY", "")
GEMINI_BASE_URL = env_str("GEMINI_BASE_URL", "")  # empty: the Gemini API's
OLLAMA_BASE_URL = env_str("OLLAMA_BASE_URL", "")  # empty: http://localhost:11434

# The event stream (docs/spec/sse-events-and-usage.md).
AGENT_EVENTS_STREAM_MAXLEN = env_int("AGENT_EVENTS_STREAM_MAXLEN", 10_000, minimum=100)
# A worker's journal writer starts a round of writes at most this often (seconds): under
# load each round carries more runs' events; an event after a quiet spell goes at once, and a
# job waiting for its events (a stage's end) starts a round at once.
AGENT_EVENTS_WRITE_INTERVAL = env_float("AGENT_EVENTS_WRITE_INTERVAL", 0.008, minimum=0.0)
AGENT_SSE_KEEPALIVE_SECONDS = env_float("AGENT_SSE_KEEPALIVE_SECONDS", 15.0, minimum=0.05)
AGENT_STREAM_TOKEN_TTL_SECONDS = env_int("AGENT_STREAM_TOKEN_TTL_SECONDS", 300, minimum=10)
# How long a process remembers an API token it has looked up (0: not at all): a token
# deleted, or its user deactivated, still works this long in a process that has seen it.
AGENT_API_TOKEN_CACHE_SECONDS = env_float("AGENT_API_TOKEN_CACHE_SECONDS", 5.0, minimum=0)

# --- billing (billing/) ---------------------------------------------------------------------
# The currency of a provider's own cost for a model with no catalog entry to name one.
BILLING_DEFAULT_CURRENCY = env_str("BILLING_DEFAULT_CURRENCY", "USD")
# Rate limits per user on creating runs (docs/operations.md, "Rate limits"): runs per window
# ("60/minute"; empty, none) and runs active at once (0, none), with the Retry-After a user
# over the second is told.
RATE_LIMIT_RUNS = env_str("RATE_LIMIT_RUNS", "")
MAX_ACTIVE_RUNS_PER_USER = env_int("MAX_ACTIVE_RUNS_PER_USER", 0, minimum=0)
RATE_LIMIT_ACTIVE_RETRY_SECONDS = env_int("RATE_LIMIT_ACTIVE_RETRY_SECONDS", 5, minimum=1)
# Where the window is counted (empty: REDIS_URL).
RATE_LIMIT_STORAGE_URL = env_str("RATE_LIMIT_STORAGE_URL", "")
# Spending limits, in that currency, of users without a budget of their own (docs/billing.md,
# "Budgets"): empty, none.
BUDGET_DEFAULT_DAILY = env_decimal("BUDGET_DEFAULT_DAILY")
BUDGET_DEFAULT_MONTHLY = env_decimal("BUDGET_DEFAULT_MONTHLY")
# The providers whose models `update_pricing_catalog` takes from LiteLLM's catalog.
BILLING_CATALOG_PROVIDERS = env_list(
    "BILLING_CATALOG_PROVIDERS",
    ["deepseek", "dashscope", "openai", "anthropic", "gemini", "ollama"],
)
# The period the admin's costs page shows when none is chosen, in days.
BILLING_COSTS_DEFAULT_DAYS = env_int("BILLING_COSTS_DEFAULT_DAYS", 30, minimum=1)
# --- end billing ----------------------------------------------------------------------------

# --- attachments (attachments/) -------------------------------------------------------------
# Signed URLs are {PUBLIC_BASE_URL}/storage/v1/object/sign/{bucket}/{path}?token=… (Supabase's
# shape) and this service serves them: set it to the address clients reach this service at.
PUBLIC_BASE_URL = env_str("PUBLIC_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
if not PUBLIC_BASE_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(f"PUBLIC_BASE_URL must be an http(s) URL, got {PUBLIC_BASE_URL!r}")
ATTACHMENT_BUCKET = env_str("ATTACHMENT_BUCKET", "agent-inputs")
ATTACHMENT_MAX_BYTES = env_int("ATTACHMENT_MAX_BYTES", 5 * 1024 * 1024, minimum=1)
# How long an official Agent Protocol step request waits for its step to finish before it
# answers the step as it stands (running).
AGENT_PROTOCOL_STEP_WAIT_SECONDS = env_int("AGENT_PROTOCOL_STEP_WAIT_SECONDS", 120, minimum=1)
# How long a request answered with a run's final object (a non-streamed Responses or Agent API
# request) waits for the run, on the event loop, before answering it as it stands. Under the
# OpenAI SDK's own timeout (600 s).
AGENT_RESPONSE_WAIT_SECONDS = env_int("AGENT_RESPONSE_WAIT_SECONDS", 540, minimum=1)
# The largest artifact a client may upload to a task (the Agent Protocol; the spec's 50 MB).
ARTIFACT_MAX_BYTES = env_int("ARTIFACT_MAX_BYTES", 50 * 1024 * 1024, minimum=1)
# The largest request body daphne reads (config/daphne_requests.py): a larger one is refused
# before it is read. By default the largest upload, with a megabyte for its multipart framing;
# each endpoint refuses bodies over its own, smaller, limit itself.
REQUEST_BODY_MAX_BYTES = env_int(
    "REQUEST_BODY_MAX_BYTES",
    max(ARTIFACT_MAX_BYTES, ATTACHMENT_MAX_BYTES) + 1024 * 1024,
    minimum=1,
)
ATTACHMENT_SIGNED_URL_TTL_SECONDS = env_int("ATTACHMENT_SIGNED_URL_TTL_SECONDS", 3600, minimum=1)
# Empty: a key derived from SECRET_KEY (which has no production default either).
ATTACHMENT_SIGNING_SECRET = env_str("ATTACHMENT_SIGNING_SECRET", "")
# "filesystem" (under ATTACHMENT_STORAGE_ROOT) or "s3": S3 or Supabase Storage's S3 endpoint
# through django-storages (pip install "django-storages[s3]"); credentials may also come from
# boto3's own AWS_* variables. Buckets are top-level folders (key prefixes on S3).
ATTACHMENT_STORAGE_BACKEND = env_str("ATTACHMENT_STORAGE_BACKEND", "filesystem")
ATTACHMENT_STORAGE_ROOT = Path(env_str("ATTACHMENT_STORAGE_ROOT") or LOCAL_DIR / "attachments")
_attachment_storage: dict[str, object]
if ATTACHMENT_STORAGE_BACKEND == "filesystem":
    _attachment_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": ATTACHMENT_STORAGE_ROOT},
    }
elif ATTACHMENT_STORAGE_BACKEND == "s3":
    _attachment_s3_bucket = env_str("ATTACHMENT_S3_BUCKET_NAME", "")
    if not _attachment_s3_bucket:
        raise ImproperlyConfigured("ATTACHMENT_S3_BUCKET_NAME must be set for the s3 backend")
    _attachment_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": _attachment_s3_bucket,
            "endpoint_url": env_str("ATTACHMENT_S3_ENDPOINT_URL", "") or None,
            "region_name": env_str("ATTACHMENT_S3_REGION", "") or None,
            "access_key": env_str("ATTACHMENT_S3_ACCESS_KEY_ID", "") or None,
            "secret_key": env_str("ATTACHMENT_S3_SECRET_ACCESS_KEY", "") or None,
            "addressing_style": "path",
            "default_acl": None,
            # Never overwrite: a failed upload deletes what it wrote, never someone's object.
            "file_overwrite": False,
        },
    }
else:
    raise ImproperlyConfigured(
        f"ATTACHMENT_STORAGE_BACKEND must be filesystem or s3, got {ATTACHMENT_STORAGE_BACKEND!r}"
    )
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "attachments": _attachment_storage,
}
# Images a model may show in a compiled ui_schema (agent_runs/ui_schema.py): URL prefixes,
# comma-separated; by default only this service's signed URLs.
UI_SCHEMA_IMAGE_URL_PREFIXES = env_list(
    "UI_SCHEMA_IMAGE_URL_PREFIXES", [f"{PUBLIC_BASE_URL}/storage/v1/object/sign/"]
)
# --- end attachments ------------------------------------------------------------------------

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "agent_runs.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "agent_runs.authentication.ApiKeyScopes",
    ],
    "DEFAULT_PARSER_CLASSES": ["rest_framework.parsers.JSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "config.exceptions.api_exception_handler",
    "UNAUTHENTICATED_USER": None,
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
}

# The OpenAPI schema (/api/schema/) and its pages (/api/docs/, /api/redoc/), described in
# agent_runs/api/openapi.py. Public: the schema holds no secret, and every endpoint it lists still
# asks for credentials.
SPECTACULAR_SETTINGS = {
    "TITLE": "Agent run server API",
    "DESCRIPTION": (
        "Runs AI agents over one run core, through five protocols: AG-UI "
        "(docs/protocols/agui.md), the Agent Protocol (docs/protocols/agent-protocol.md), the "
        "AgentScope Agent API (docs/protocols/agent-api.md), the OpenAI Responses API "
        "(docs/protocols/openai-responses.md) and A2A (docs/protocols/a2a.md). "
        'Errors are `{"detail": "<message>"}`, but for the protocols with an error shape of '
        "their own (the Agent Protocol, the Agent API, OpenAI Responses, A2A's JSON-RPC)."
    ),
    "VERSION": "1",
    "OAS_VERSION": "3.1.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SERVE_PERMISSIONS": ["rest_framework.permissions.AllowAny"],
    "SERVE_AUTHENTICATION": [],
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "ENUM_NAME_OVERRIDES": {
        "RunStatusEnum": "agent_runs.models.Run.Status",
        "InterruptStatusEnum": "agent_runs.models.Interrupt.Status",
        "BadgeStatusEnum": ["info", "success", "warning", "error", "pending"],
    },
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "agent_runs.protocols.agui.openapi.events.channels_routes_add",
        "agent_runs.api.openapi.api_key_scope_responses_add",
        "agent_runs.api.openapi.run_limit_responses_add",
        "agent_runs.api.openapi.storable_json_bodies_add",
    ],
}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "admin:login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = LOCAL_DIR / "static"

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
