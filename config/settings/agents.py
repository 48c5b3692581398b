"""The agents: push notifications, models and providers, tools, context, the event stream
and API tokens."""

from django.core.exceptions import ImproperlyConfigured

from config.env import env_bool, env_float, env_int, env_str
from config.settings.base import BASE_DIR

# Push notifications (webhooks; docs/push.md): delivered by the runs' workers.
# Push URLs on private, loopback, link-local or otherwise internal addresses are refused
# unless this is on (development, tests, a receiver on the server's own network).
PUSH_ALLOW_PRIVATE_URLS = env_bool("PUSH_ALLOW_PRIVATE_URLS", False)
# Attempts of one delivery before it is failed; retry n waits BASE * 2**(n-1) seconds.
PUSH_MAX_ATTEMPTS = env_int("PUSH_MAX_ATTEMPTS", 8, minimum=1)
PUSH_RETRY_BASE_SECONDS = env_float("PUSH_RETRY_BASE_SECONDS", 10.0, minimum=0)
PUSH_TIMEOUT_SECONDS = env_float("PUSH_TIMEOUT_SECONDS", 10.0, minimum=0.1)
# Receivers of agent_runs.signals.run_status_changed, by dotted path, connected in the web
# and the worker processes: the push outbox's, which hands a run's change to its protocol.
AGENT_RUN_STATUS_RECEIVERS: list[str] = ["agent_runs.push.receivers.on_run_status"]
# The protocols that push their runs' changes (Run.protocol -> the notifier, by dotted path,
# imported when a change has a config waiting for it: agent_runs/push/receivers.py).
PUSH_NOTIFIERS: dict[str, str] = {"a2a": "agent_runs.protocols.a2a.push.task_push_notify"}

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
