"""Billing (billing/; docs/billing.md): currency, rate limits, budgets, the pricing catalog."""

from config.env import env_decimal, env_int, env_list, env_str

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
