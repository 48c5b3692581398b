"""Billing's side of the run core's ``billing`` port (``agent_runs/ports.py``), filled in
``BillingConfig.ready()``."""

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from agent_runs.models import Run
from agent_runs.usage import Limits, RunModelCalls, RunUsageByModel, UsageSummary
from billing import budgets, selectors, services
from billing.models import UsageRecord


class BillingPort:
    """The run core's ``Billing``: billing's services and selectors, as they are."""

    def usage_record(
        self,
        *,
        run: Run,
        stage: str,
        model_id: str,
        usage: Mapping[str, Any],
        metadata: Mapping[str, Any],
    ) -> UsageRecord:
        return services.usage_record(
            run=run, stage=stage, model_id=model_id, usage=usage, metadata=metadata
        )

    def user_limits(self, *, user_id: Any) -> Limits:
        return budgets.user_limits(user_id=user_id)

    def budget_check(self, *, user_id: Any, limits: Limits | None = None) -> None:
        budgets.budget_check(user_id=user_id, limits=limits)

    def run_usage_summary(self, *, run: Run, recorded_by: datetime | None = None) -> UsageSummary:
        return selectors.run_usage_summary(run=run, recorded_by=recorded_by)

    def run_usage_by_model(self, *, run_pk: int, recorded_by: datetime) -> RunUsageByModel:
        return selectors.run_usage_by_model(run_pk=run_pk, recorded_by=recorded_by)

    def run_usage_digest(self, *, run: Run, any_records: bool = True) -> dict[str, Any]:
        return selectors.run_usage_digest(run=run, any_records=any_records)

    def run_model_calls(self, *, run: Run) -> RunModelCalls:
        return selectors.run_model_calls(run=run)

    def usage_cost_display(self, summary: UsageSummary) -> str:
        return selectors.usage_cost_display(summary)
