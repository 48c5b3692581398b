"""``GET /api/v1/agent/usage``: the caller's spending against their budget (docs/billing.md,
"Budgets")."""

from decimal import Decimal
from typing import Any

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runs.api.openapi import error_responses
from billing.budgets import Period, budget_currency, budget_periods
from billing.errors import format_money

_PERIODS = inline_serializer(
    "UsagePeriod",
    many=True,
    fields={
        "period": serializers.ChoiceField(choices=["day", "month"]),
        "start": serializers.DateTimeField(),
        "resetsAt": serializers.DateTimeField(),
        "limit": serializers.CharField(allow_null=True, help_text="A decimal string; null: none."),
        "spent": serializers.CharField(help_text="A decimal string."),
        "remaining": serializers.CharField(allow_null=True),
        "unpricedCalls": serializers.IntegerField(help_text="Calls of unknown cost (as zero)."),
    },
)


class UsageApi(APIView):
    @extend_schema(
        operation_id="usage_retrieve",
        summary="The caller's spending against their budget",
        description="Per period (the caller's day and month, in their profile's timezone, UTC "
        "without one): the limit, the spend (the sum of the caller's usage records' costs "
        "made in it) and what remains; money as decimal strings.",
        tags=["usage"],
        responses={
            200: inline_serializer(
                "BudgetUsage",
                {"currency": serializers.CharField(), "periods": _PERIODS},
            ),
            **error_responses(401),
        },
    )
    def get(self, request: Request) -> Response:
        periods = budget_periods(user_id=request.user.pk)
        return Response(
            {"currency": budget_currency(), "periods": [_period(item) for item in periods]}
        )


def _period(period: Period) -> dict[str, Any]:
    return {
        "period": period.period,
        "start": period.start,
        "resetsAt": period.resets_at,
        "limit": _money(period.limit),
        "spent": format_money(period.spent),
        "remaining": _money(period.remaining),
        "unpricedCalls": period.unpriced_calls,
    }


def _money(amount: Decimal | None) -> str | None:
    return None if amount is None else format_money(amount)
