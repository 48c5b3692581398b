"""The structured outputs the runtime asks of its models: the worker's answer and the
router's decision."""

from typing import Any, Literal

from pydantic import BaseModel, Field


class SuggestedAction(BaseModel):
    """A next step the client may offer; ``prompt`` is what it sends if the user picks it."""

    label: str
    prompt: str


class AgentOutput(BaseModel):
    """The worker's structured final output (docs/spec/sse-events-and-usage.md, TEXT_MESSAGE_END).
    The model fills it by calling AgentScope's structured-output tool; ``ui_hints`` are
    free-form here and compiled to ``ui_schema`` by ``agent_runs.ui_schema``, which drops what
    it cannot use."""

    answer: str = Field(description="The reply to show the user, in the user's language.")
    key_points: list[str] = Field(
        default=[], description="Up to five short facts the reply rests on (ids, counts)."
    )
    result_type: Literal["execution_report", "clarification", "error_report", "unknown"] = Field(
        default="unknown",
        description="execution_report after acting with tools, clarification when asking the "
        "user something, error_report when the request failed, otherwise unknown.",
    )
    suggested_actions: list[SuggestedAction] = Field(
        default=[], description="Up to three next steps the user may want."
    )
    status: Literal["success", "partial_success", "failed"] = "success"
    ui_hints: dict[str, Any] | None = Field(
        default=None,
        description='Optional card: {"appearance": "card", "title": str, "blocks": [{"type": '
        '"text"|"badge"|"list"|"key_value"|"image"|"divider", ...}]}.',
    )


class RouteDecision(BaseModel):
    """The router stage's decision: how the worker should handle the turn, and with which of
    the enabled tools. As the model gives it, an empty or unusable list under ``use_tools``
    means all of them; ``router_decide`` returns the resolved list (empty: no tools)."""

    route: Literal["answer", "use_tools", "clarify"] = Field(
        description="answer: reply directly; use_tools: act with tools; clarify: the request "
        "is ambiguous, ask the user one question."
    )
    tools: list[str] = Field(default=[], description="The tools the worker needs, by name.")
