"""The database and Redis."""

import dj_database_url

from config.env import env_int, env_str
from config.settings.base import LOCAL_DIR

# PostgreSQL in tests and production; SQLite only for the quick start.
DATABASES = {
    "default": dj_database_url.parse(
        env_str("DATABASE_URL") or f"sqlite:///{LOCAL_DIR / 'db.sqlite3'}",
        conn_max_age=env_int("DATABASE_CONN_MAX_AGE", 60, minimum=0),
        conn_health_checks=True,
    )
}
DATABASE_POOL_MAX_SIZE = env_int("DATABASE_POOL_MAX_SIZE", 10, minimum=0)
DATABASE_PREPARE_THRESHOLD = env_int("DATABASE_PREPARE_THRESHOLD", 5, minimum=0)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # Parameters sent apart from the statement's text (server-side binding), so a statement
    # has the same text every time, and one a connection has run this many times is
    # prepared: PostgreSQL plans it once, where it planned every run's claim, steps and
    # events anew (planning took longer than running them; docs/benchmarks.md). 0 turns
    # preparing off (behind a transaction-mode pooler that cannot keep prepared statements).
    DATABASES["default"].setdefault("OPTIONS", {})["server_side_binding"] = True
    DATABASES["default"]["OPTIONS"]["prepare_threshold"] = DATABASE_PREPARE_THRESHOLD or None
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
