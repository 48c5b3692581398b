"""Template filters of the costs page."""

from decimal import Decimal

from django import template

from billing.selectors import format_cost

register = template.Library()


@register.filter(name="cost")
def cost_filter(value: Decimal | None) -> str:
    """``0.000123`` rather than ``1.23E-4``; ``unknown`` for ``None``."""
    return "unknown" if value is None else format_cost(value)


@register.filter(name="thousands")
def thousands_filter(value: int) -> str:
    """``1,234,567``."""
    return f"{value:,}"
