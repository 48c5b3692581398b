"""``python manage.py set_budget <username> [--daily 1.50] [--monthly 20] [--clear]``: create
or update a user's budget (docs/billing.md, "Budgets") and print it."""

from decimal import Decimal, InvalidOperation
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from billing.budgets import budget_currency, budget_periods
from billing.errors import format_money
from billing.models import Budget


def _amount(value: str) -> Decimal:
    try:
        amount = Decimal(value)
    except InvalidOperation:
        raise CommandError(f"not an amount: {value!r} (say 1.50)") from None
    if not amount.is_finite() or amount < 0:
        raise CommandError(f"an amount of at least 0, not {value!r}")
    return amount


class Command(BaseCommand):
    help = "Set a user's daily and/or monthly spending limit, or clear them; print the budget."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--daily", type=_amount, help="The daily limit (e.g. 1.50).")
        parser.add_argument("--monthly", type=_amount, help="The monthly limit (e.g. 20).")
        parser.add_argument(
            "--clear", action="store_true", help="Remove the user's own limits first."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        user = get_user_model().objects.filter(username=options["username"]).first()
        if user is None:
            raise CommandError(f"no user named {options['username']!r}")
        budget, _ = Budget.objects.get_or_create(user=user)
        if options["clear"]:
            budget.daily_limit = budget.monthly_limit = None
        if options["daily"] is not None:
            budget.daily_limit = options["daily"]
        if options["monthly"] is not None:
            budget.monthly_limit = options["monthly"]
        budget.save()
        currency = budget_currency()
        for period in budget_periods(user_id=user.pk):
            limit = "none" if period.limit is None else f"{format_money(period.limit)} {currency}"
            self.stdout.write(
                f"{period.period}: limit {limit}, spent {format_money(period.spent)} {currency} "
                f"(resets {period.resets_at.isoformat()})"
            )
