"""Response shapes of the threads-and-runs REST endpoints (docs/protocols/agui.md, Threads and
runs) and of the interrupts' list, camelCase as the rest of AG-UI. Output only: these
endpoints take no body."""

from typing import Any

from django.conf import settings
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers

from agent_runs.models import Interrupt, Run, Thread
from agent_runs.usage import CostSource, UsageSummary, format_cost


class LatestRunSerializer(serializers.Serializer):
    """A thread's newest run, in brief."""

    runId = serializers.CharField()
    status = serializers.ChoiceField(choices=Run.Status.choices)
    createdAt = serializers.DateTimeField()
    finishedAt = serializers.DateTimeField(allow_null=True)
    automationJob = serializers.CharField(
        allow_null=True, help_text="The automation job it ran (docs/automations.md); null: a chat."
    )


class ThreadSerializer(serializers.Serializer):
    """A thread; ``updatedAt`` is its latest activity (a message stored, a run ended)."""

    threadId = serializers.UUIDField(source="id")
    title = serializers.CharField(
        allow_null=True,
        help_text="The start of the thread's first user message (80 characters at most); "
        "null for a thread without one, and empty when it held only images.",
    )
    createdAt = serializers.DateTimeField(source="created_at")
    updatedAt = serializers.DateTimeField(source="updated_at")
    latestRun = serializers.SerializerMethodField(method_name="latest_run")

    @extend_schema_field(LatestRunSerializer(allow_null=True))
    def latest_run(self, thread: Thread) -> dict[str, Any] | None:
        # Annotated by agent_runs.selectors.threads.
        if thread.latest_run_run_id is None:  # type: ignore[attr-defined]
            return None
        return {
            "runId": thread.latest_run_run_id,  # type: ignore[attr-defined]
            "status": thread.latest_run_status,  # type: ignore[attr-defined]
            "createdAt": _iso(thread.latest_run_created_at),  # type: ignore[attr-defined]
            "finishedAt": _iso(thread.latest_run_finished_at),  # type: ignore[attr-defined]
            "automationJob": thread.latest_run_automation_job or None,  # type: ignore[attr-defined]
        }


class ThreadDetailSerializer(ThreadSerializer):
    runCount = serializers.IntegerField(source="run_count")


class ThreadPageSerializer(serializers.Serializer):
    threads = ThreadSerializer(many=True)
    next = serializers.CharField(
        allow_null=True, help_text="The cursor of the next page; null on the last page."
    )


class RunSerializer(serializers.Serializer):
    """A run. ``errorCode`` is its ``RUN_ERROR``'s code (``cancelled``, ``model_error``, …):
    null while it has none."""

    threadId = serializers.UUIDField(source="thread_id")
    runId = serializers.CharField(source="run_id")
    parentRunId = serializers.SerializerMethodField(method_name="parent_run_id")
    status = serializers.ChoiceField(choices=Run.Status.choices)
    runtimeMode = serializers.ChoiceField(source="runtime_mode", choices=Run.RuntimeMode.choices)
    createdAt = serializers.DateTimeField(source="created_at")
    startedAt = serializers.DateTimeField(source="started_at", allow_null=True)
    finishedAt = serializers.DateTimeField(source="finished_at", allow_null=True)
    errorCode = serializers.CharField(source="error_code", allow_null=True)
    automationJob = serializers.SerializerMethodField(
        method_name="automation_job",
        help_text="The automation job the run ran (docs/automations.md); null: a chat run.",
    )

    @extend_schema_field(serializers.CharField(allow_null=True))
    def automation_job(self, run: Run) -> str | None:
        return run.automation_job or None

    @extend_schema_field(serializers.CharField(allow_null=True))
    def parent_run_id(self, run: Run) -> str | None:
        return run.parent_run_id or None


class RunPageSerializer(serializers.Serializer):
    runs = RunSerializer(many=True)
    next = serializers.CharField(
        allow_null=True, help_text="The cursor of the next page; null on the last page."
    )


class UsageSerializer(serializers.Serializer):
    """The run's model calls' tokens, summed (docs/spec/sse-events-and-usage.md, 5.3)."""

    inputTokens = serializers.IntegerField(source="input_tokens")
    outputTokens = serializers.IntegerField(source="output_tokens")
    totalTokens = serializers.IntegerField(source="total_tokens")
    cachedPromptTokens = serializers.IntegerField(source="cached_prompt_tokens")
    promptCacheHitTokens = serializers.IntegerField(source="prompt_cache_hit_tokens")
    promptCacheMissTokens = serializers.IntegerField(source="prompt_cache_miss_tokens")
    reasoningTokens = serializers.IntegerField(source="reasoning_tokens")
    modelCalls = serializers.IntegerField(source="model_call_records")
    usageComplete = serializers.BooleanField(source="usage_complete")


class CostSerializer(serializers.Serializer):
    """The run's cost (spec 5.4-5.6): ``amount`` a decimal string, null when unknown (a call
    without a catalog price, or calls in different currencies)."""

    amount = serializers.SerializerMethodField()
    currency = serializers.SerializerMethodField()
    costSource = serializers.ChoiceField(source="cost_source", choices=CostSource.choices)
    unpricedCalls = serializers.IntegerField(source="unpriced_calls")

    @extend_schema_field(
        {"type": ["string", "null"], "format": "decimal", "examples": ["0.000611856"]}
    )
    def get_amount(self, usage: UsageSummary) -> str | None:
        return None if usage.cost is None else format_cost(usage.cost)

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_currency(self, usage: UsageSummary) -> str | None:
        if not usage.model_call_records:
            return str(settings.BILLING_DEFAULT_CURRENCY)  # nothing billed, in any currency
        return usage.currency or None  # "": calls in different currencies


class RunDetailSerializer(RunSerializer):
    """A run with its usage and cost (``context["usage"]``, the run's UsageSummary)."""

    usage = serializers.SerializerMethodField(method_name="usage_totals")
    cost = serializers.SerializerMethodField(method_name="cost_totals")

    @extend_schema_field(UsageSerializer)
    def usage_totals(self, run: Run) -> dict[str, Any]:
        return dict(UsageSerializer(self.context["usage"]).data)

    @extend_schema_field(CostSerializer)
    def cost_totals(self, run: Run) -> dict[str, Any]:
        return dict(CostSerializer(self.context["usage"]).data)


class InterruptSerializer(serializers.Serializer):
    """An interrupt: AG-UI 1.0's ``Interrupt`` (``interrupt_as_agui``), and where it is, what
    it holds and how it stands."""

    id = serializers.CharField()
    reason = serializers.CharField(help_text="`tool_approval`, or `tool_call` for a client tool.")
    message = serializers.CharField()
    toolCallId = serializers.CharField()
    responseSchema = serializers.JSONField(
        allow_null=True, help_text="The JSON schema a resume's payload must meet."
    )
    expiresAt = serializers.DateTimeField()
    metadata = serializers.DictField(help_text="`toolName` and `arguments`, as AG-UI sends them.")
    threadId = serializers.UUIDField()
    runId = serializers.CharField(help_text="The run it stopped.")
    kind = serializers.ChoiceField(choices=Interrupt.Kind.choices)
    status = serializers.ChoiceField(choices=Interrupt.Status.choices)
    toolName = serializers.CharField()
    arguments = serializers.DictField()
    createdAt = serializers.DateTimeField()


class InterruptDetailSerializer(InterruptSerializer):
    answer = serializers.JSONField(
        allow_null=True, help_text="The answer it was given (`{payload}`, or a tool's result)."
    )
    continuedBy = serializers.CharField(
        allow_null=True,
        help_text="The runId of the run that went on with the reply it held, once every "
        "interrupt of its run is answered.",
    )


class InterruptAnswerSerializer(serializers.Serializer):
    """An approval's answer, as its ``responseSchema`` describes it."""

    approved = serializers.BooleanField()
    arguments = serializers.DictField(
        required=False, help_text="The call's arguments, edited (valid for the tool's schema)."
    )
    reason = serializers.CharField(required=False, max_length=2000)


class InterruptPageSerializer(serializers.Serializer):
    interrupts = InterruptSerializer(many=True)
    next = serializers.CharField(
        allow_null=True, help_text="The cursor of the next page; null on the last page."
    )


def _iso(moment: Any) -> str | None:
    return None if moment is None else serializers.DateTimeField().to_representation(moment)
