"""Typed readers for settings that come from the environment.

Each helper raises ``ImproperlyConfigured`` on a value it cannot read, so a bad deployment
fails at start-up with the variable's name instead of misbehaving later.
"""

import os
import sys
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import TypeVar, overload

from django.core.exceptions import ImproperlyConfigured

N = TypeVar("N", int, float)

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


@overload
def env_str(name: str) -> str | None: ...
@overload
def env_str(name: str, default: str) -> str: ...
def env_str(name: str, default: str | None = None) -> str | None:
    value = os.environ.get(name)
    return default if value is None else value


def env_bool(name: str, default: bool) -> bool:
    value = os.environ.get(name)
    if value is None:
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise ImproperlyConfigured(f"{name} must be a boolean (true/false), got {value!r}")


def env_int(name: str, default: int, *, minimum: int | None = None) -> int:
    return _env_number(name, default, int, "an integer", minimum)


def env_float(name: str, default: float, *, minimum: float | None = None) -> float:
    return _env_number(name, default, float, "a number", minimum)


def _env_number(
    name: str, default: N, parse: Callable[[str], N], kind: str, minimum: N | None
) -> N:
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return default
    try:
        number = parse(value)
    except ValueError as exc:
        raise ImproperlyConfigured(f"{name} must be {kind}, got {value!r}") from exc
    if minimum is not None and number < minimum:
        raise ImproperlyConfigured(f"{name} must be at least {minimum}, got {number}")
    return number


def env_decimal(name: str) -> Decimal | None:
    """An amount of money (``1.50``), never negative; ``None`` when unset or empty."""
    value = os.environ.get(name)
    if value is None or value.strip() == "":
        return None
    try:
        amount = Decimal(value.strip())
    except InvalidOperation as exc:
        raise ImproperlyConfigured(f"{name} must be an amount such as 1.50, got {value!r}") from exc
    if not amount.is_finite() or amount < 0:
        raise ImproperlyConfigured(f"{name} must be an amount of at least 0, got {value!r}")
    return amount


def env_list(name: str, default: list[str]) -> list[str]:
    value = os.environ.get(name)
    if value is None:
        return default
    return [item.strip() for item in value.split(",") if item.strip()]


def warn_once_per_start(message: str, *, marker: str) -> None:
    """Print ``message`` to stderr unless a process of this start has: the first sets the
    environment variable ``marker``, which the processes it spawns inherit (a quick start's
    daphne and worker), so a start warns once rather than once per process."""
    if os.environ.get(marker):
        return
    os.environ[marker] = "1"
    print(message, file=sys.stderr)
