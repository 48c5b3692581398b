"""What the Agent Protocol's requests carry, checked before anything is stored: the bodies
of each set's routes (JSON as ``json_input.JsonBodyParser`` reads it), page numbers, and a
task's text as the core's ``RunAgentInput``. Pure but for reading the request stream."""

import uuid
from typing import Any, Literal, TypeVar

from django.http import Http404
from pydantic import BaseModel, ConfigDict, Field, StrictBool, StrictStr, ValidationError

from agent_runs.api.json_input import NOT_BLANK_PATTERN
from agent_runs.protocols.agent_protocol.errors import BodyInvalid
from agent_runs.run_input import ForwardedProps, InputMessage, ResumeEntry, RunAgentInput

MAX_TASK_CHARS = 10_000
MAX_PAGE_SIZE = 100
MAX_PAGE_NUMBER = 10**9

B = TypeVar("B", bound=BaseModel)


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class SpecTaskCreate(_Body):
    # Not only blanks (``task_text_check``): the schema says so without the check's message.
    task: StrictStr = Field(
        min_length=1, max_length=MAX_TASK_CHARS, json_schema_extra={"pattern": NOT_BLANK_PATTERN}
    )
    workspace: StrictStr | None = Field(default=None, max_length=1024)


class SpecStepCreate(_Body):
    name: StrictStr = Field(default="", max_length=200)
    input: Any = None
    additional_input: dict[str, Any] = {}


class SpecStepUpdate(_Body):
    status: Literal["created", "running", "completed", "failed"] | None = None
    output: Any = None
    additional_output: dict[str, Any] | None = None
    is_last: StrictBool | None = None


class OfficialTaskCreate(_Body):
    # Not only blanks, when given (``task_text_check``).
    input: StrictStr | None = Field(
        default=None, max_length=MAX_TASK_CHARS, json_schema_extra={"pattern": NOT_BLANK_PATTERN}
    )
    additional_input: dict[str, Any] | None = None


class OfficialStepCreate(_Body):
    input: StrictStr | None = Field(default=None, max_length=MAX_TASK_CHARS)
    additional_input: dict[str, Any] | None = None


class ApprovalAnswer(_Body):
    """An approval step's answer, a step's (or a resume's) ``additional_input``: the
    interrupt it answers, whether the call may run, and optionally its arguments edited
    (valid for the tool's schema) and a reason."""

    interrupt_id: StrictStr = Field(alias="interruptId", min_length=1, max_length=40)
    approved: StrictBool
    arguments: dict[str, Any] | None = None
    reason: StrictStr | None = Field(default=None, max_length=2000)

    def payload(self) -> dict[str, Any]:
        """The answer as the interrupt's ``responseSchema`` takes it."""
        payload: dict[str, Any] = {"approved": self.approved}
        if self.arguments is not None:
            payload["arguments"] = self.arguments
        if self.reason is not None:
            payload["reason"] = self.reason
        return payload

    def run_input(self, *, thread_id: uuid.UUID) -> RunAgentInput:
        """The answer as the core's command: a run with no new message that goes on with
        the reply the interrupt held (it must be the last one open)."""
        return RunAgentInput(
            thread_id=thread_id,
            run_id=f"task-run-{uuid.uuid4()}",
            messages=[],
            forwarded_props=ForwardedProps(runtime_mode="chat"),
            resume=[
                ResumeEntry(
                    interrupt_id=self.interrupt_id, status="resolved", payload=self.payload()
                )
            ],
        )


class ApprovalBody(_Body):
    """A body that answers an approval: ``additional_input`` holds the answer."""

    additional_input: ApprovalAnswer


def approval_parse(data: Any, *, status: int = 400) -> ApprovalAnswer | None:
    """The approval a step's or a resume's body answers: one whose ``additional_input``
    names an ``interruptId`` (``BodyInvalid`` naming each problem of it); ``None`` for any
    other body."""
    extra = data.get("additional_input") if isinstance(data, dict) else None
    if not isinstance(extra, dict) or "interruptId" not in extra:
        return None
    return body_parse(ApprovalBody, data, status=status).additional_input


def body_parse(model: type[B], data: Any, *, status: int = 400) -> B:
    """The body as ``model``; ``BodyInvalid`` naming each problem otherwise."""
    if not isinstance(data, dict):
        raise BodyInvalid("the body must be a JSON object", status=status)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        problems = [
            {"field": ".".join(str(part) for part in error["loc"]), "problem": error["msg"]}
            for error in exc.errors(include_url=False, include_input=False)
        ]
        summary = "; ".join(f"{p['field'] or 'body'}: {p['problem']}" for p in problems)
        raise BodyInvalid(f"invalid body: {summary}", status=status, details=problems) from None


def task_text_check(text: str, *, field: str, status: int = 400) -> str:
    """A task's text: something to do, not only blanks."""
    if not text.strip():
        raise BodyInvalid(f"invalid body: {field}: must not be blank", status=status)
    return text


def task_run_input(*, thread_id: uuid.UUID, text: str) -> RunAgentInput:
    """A task's text as the core's command: one new chat turn of the task's thread."""
    return RunAgentInput(
        thread_id=thread_id,
        run_id=f"task-run-{uuid.uuid4()}",
        messages=[InputMessage(id=f"task-input-{uuid.uuid4()}", role="user", content=text)],
        forwarded_props=ForwardedProps(runtime_mode="chat"),
    )


def page_query(query: Any, *, page_key: str, size_key: str, default_size: int) -> tuple[int, int]:
    """The page number (from 1) and page size (1 to 100) a list's query asks for."""
    number = _positive_int(query.get(page_key, "1"), page_key, maximum=MAX_PAGE_NUMBER)
    size = _positive_int(query.get(size_key, str(default_size)), size_key, maximum=MAX_PAGE_SIZE)
    return number, size


def _positive_int(value: str, name: str, *, maximum: int) -> int:
    if (
        not (value.isascii() and value.isdigit() and len(value) <= 10)
        or not 1 <= int(value) <= maximum
    ):
        raise BodyInvalid(f"{name} must be an integer from 1 to {maximum}")
    return int(value)


def uuid_or_404(value: str) -> uuid.UUID:
    """An id of the protocol's objects (UUIDs): anything else names nothing."""
    try:
        return uuid.UUID(value)
    except ValueError:
        raise Http404 from None
