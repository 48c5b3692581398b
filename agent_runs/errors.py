"""Domain errors of the run core. Each carries its ``code`` and HTTP ``status``; each protocol
renders them in its own shape (agent_runs/protocols/<protocol>/errors.py)."""

import json


class DomainError(Exception):
    """The base of every domain error (the core's, and the other apps'): an error the caller
    can act on, its message meant for the client as it stands. Each carries its stable
    ``code`` and its HTTP ``status``, so a protocol renders any of them in its own shape from
    one table (the class attributes), whatever order they are looked at in."""

    code = "invalid_request"
    status = 400
    # HTTP headers its answer carries, in any protocol's shape (a rate limit's Retry-After).
    headers: dict[str, str] | None = None


class RunInputInvalid(DomainError):
    """A run's input broke a rule of docs/spec/run-agent-input.md; the message is the spec's."""

    code = "invalid_input"
    status = 422


class RunPayloadTooLarge(RunInputInvalid):
    """The raw body is over the 256 KB limit (docs/spec/run-agent-input.md, Validation Rules)."""

    code = "payload_too_large"
    status = 413

    def __init__(self) -> None:
        super().__init__("RunAgentInput payload exceeds size limit")


class RunIdConflict(DomainError):
    """The runId already names a run of this thread with a different body."""

    code = "run_id_conflict"
    status = 409

    def __init__(self) -> None:
        super().__init__("runId already exists in this thread with a different RunAgentInput")


class RunIdAmbiguous(DomainError):
    """A runId names runs in several of the caller's threads: the request must say which."""

    code = "run_id_ambiguous"
    status = 409

    def __init__(self) -> None:
        super().__init__("runId is used in several threads: pass threadId")


class TurnRefused(DomainError):
    """A run's ``TurnRule`` (``services.runs.RunOptions.turn``) does not hold for its thread
    under the thread's row lock: another run came first. Each protocol words it its own way."""

    code = "turn_refused"
    status = 409


class ThreadBusy(TurnRefused):
    """A run that must start on an idle thread (or chain of runs) found a run of it still
    queued, running or paused."""

    code = "thread_busy"

    def __init__(self) -> None:
        super().__init__("the thread has a run queued, running or paused")


class RunNotLatest(TurnRefused):
    """A run that answers an earlier run found that run no longer the latest: another run
    followed it first."""

    code = "run_not_latest"

    def __init__(self, run_id: str) -> None:
        super().__init__(f"run {json.dumps(run_id)} is no longer the latest run of its thread")


class EventCursorInvalid(DomainError):
    """A stream's resume cursor (``Last-Event-ID``) is not an event id."""

    code = "invalid_cursor"
    status = 400

    def __init__(self) -> None:
        super().__init__("Last-Event-ID must be an event id")


class RunNoLongerRunning(Exception):
    """The run was cancelled (or otherwise ended) while its job worked on it; not an API
    error: the job stops writing for it."""


class ConversationMessageUnknown(RunInputInvalid):
    """A turn of a conversation the client holds names an earlier message this thread does
    not have (the AG-UI conversation endpoint)."""

    code = "unknown_message"

    def __init__(self, message_id: str) -> None:
        super().__init__(
            f"RunAgentInput.messages: message {json.dumps(message_id)} is not in this thread"
        )


class ConversationMessageRepeated(DomainError):
    """The new user message of a run is one the thread already has (a message id the client
    chose: the AG-UI endpoints'; the other protocols make a fresh one for each message)."""

    code = "message_id_conflict"
    status = 409

    def __init__(self, message_id: str) -> None:
        super().__init__(
            f"RunAgentInput.messages: the new user message {json.dumps(message_id)} "
            "is already in this thread"
        )


class OnDisconnectInvalid(DomainError):
    """A single-request run's ``on_disconnect`` is neither ``cancel`` nor ``continue``."""

    code = "invalid_request"
    status = 400

    def __init__(self) -> None:
        super().__init__("on_disconnect must be cancel or continue")


class RunNotPaused(DomainError):
    """Resume of a run (a task) that is not paused."""

    code = "not_paused"
    status = 409

    def __init__(self) -> None:
        super().__init__("the task is not paused")


class StepNotEditable(DomainError):
    """A PATCH of a step the agent ran (a stage of a run): only a client's own steps change."""

    code = "step_not_editable"
    status = 409

    def __init__(self) -> None:
        super().__init__("the step is the agent's: only steps a client created can be updated")


class StepTransitionInvalid(DomainError):
    """A PATCH would move a client's step back, or out of an ended status."""

    code = "invalid_transition"
    status = 409

    def __init__(self, current: str, requested: str) -> None:
        super().__init__(f"a step cannot go from {current} to {requested}")


class ArtifactPathInvalid(DomainError):
    """An artifact's ``relative_path`` leaves the task's workspace (absolute, ``..``, NUL)."""

    code = "invalid_path"
    status = 400

    def __init__(self) -> None:
        super().__init__(
            "relative_path must be a relative path inside the task's workspace "
            "(no leading /, no .., no backslash or NUL, at most 1024 characters)"
        )


class ArtifactTooLarge(DomainError):
    """An uploaded artifact is over ``ARTIFACT_MAX_BYTES`` (50 MB by default)."""

    code = "file_too_large"
    status = 413

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"file exceeds the maximum size of {max_bytes // (1024 * 1024)} MB")


class PushUrlRefused(DomainError):
    """A push notification URL the server will not call: not http(s), no host, a host that
    does not resolve, or one that resolves to a private, loopback, link-local or otherwise
    internal address while ``PUSH_ALLOW_PRIVATE_URLS`` is off (docs/push.md, "Push URLs")."""

    code = "push_url_refused"
    status = 400

    def __init__(self, reason: str) -> None:
        super().__init__(f"push notification URL refused: {reason}")


class InterruptOpen(DomainError):
    """A new user message on a thread whose run waits on an approval: the answer comes
    first (a run that resumes it)."""

    code = "interrupt_open"
    status = 409

    def __init__(self, interrupt_id: str) -> None:
        super().__init__(f"thread has an open interrupt: {interrupt_id}")
        self.interrupt_id = interrupt_id


class ToolCallsPending(DomainError):
    """A new user message on a thread whose run waits on the client's own tool calls, which
    the turn does not answer."""

    code = "tool_calls_pending"
    status = 409

    def __init__(self, tool_call_ids: list[str]) -> None:
        super().__init__(f"thread has pending tool calls: {', '.join(tool_call_ids)}")


class InterruptNotFound(DomainError):
    """A resume names an interrupt the thread (of the caller's) does not have."""

    code = "interrupt_not_found"
    status = 404

    def __init__(self, interrupt_id: str) -> None:
        super().__init__(f"interrupt {json.dumps(interrupt_id)} not found")
        self.interrupt_id = interrupt_id


class InterruptClosed(DomainError):
    """A resume answers an interrupt that is answered already (or was cancelled)."""

    code = "interrupt_closed"
    status = 409

    def __init__(self, interrupt_id: str, status: str) -> None:
        super().__init__(f"interrupt {json.dumps(interrupt_id)} is not open: it is {status}")
        self.interrupt_id = interrupt_id
        self.interrupt_status = status


class InterruptExpired(DomainError):
    """A resume answers an interrupt past its ``expiresAt``."""

    code = "interrupt_expired"
    status = 410

    def __init__(self, interrupt_id: str) -> None:
        super().__init__(f"interrupt {json.dumps(interrupt_id)} has expired")
        self.interrupt_id = interrupt_id


class ResumeIncomplete(DomainError):
    """A resume leaves some of the thread's open interrupts unanswered: one resume answers
    them all (AG-UI 1.0)."""

    code = "resume_incomplete"
    status = 422

    def __init__(self, missing: list[str]) -> None:
        super().__init__(f"resume must answer every open interrupt; missing: {', '.join(missing)}")
        self.missing = missing


class ResumePayloadInvalid(DomainError):
    """A resume's payload does not meet its interrupt's ``responseSchema``."""

    code = "invalid_input"
    status = 422

    def __init__(self, interrupt_id: str, place: str, reason: str) -> None:
        super().__init__(
            f"invalid resume payload for interrupt {json.dumps(interrupt_id)} at {place}: {reason}"
        )


class ToolCallUnknown(DomainError):
    """A turn answers a tool call the thread does not wait on (unknown, or answered)."""

    code = "invalid_input"
    status = 422

    def __init__(self, tool_call_id: str) -> None:
        super().__init__(
            f"RunAgentInput.messages: tool call {json.dumps(tool_call_id)} is not pending "
            "(unknown or already answered)"
        )


class ToolNameTaken(DomainError):
    """A client tool named as a backend tool."""

    code = "invalid_input"
    status = 422

    def __init__(self, name: str) -> None:
        super().__init__(f'RunAgentInput.tools: "{name}" is a backend tool')


class InterruptNotAnApproval(DomainError):
    """An answer of approval for an interrupt that waits on a client's tool result."""

    code = "interrupt_not_an_approval"
    status = 409

    def __init__(self, interrupt_id: str) -> None:
        super().__init__(
            f"interrupt {json.dumps(interrupt_id)} waits on the client's tool result, "
            "not on an approval"
        )


class AutomationJobInvalid(DomainError):
    """An automation job's field breaks its rule (docs/automations.md); the message names the
    field (``invalid schedule: …``)."""

    code = "invalid_input"
    status = 422

    def __init__(self, field: str, problem: str) -> None:
        super().__init__(f"invalid {field}: {problem}")
        self.field = field


class AutomationJobBusy(DomainError):
    """A job whose ``multitask`` is ``reject`` was asked to run while its previous run is
    still queued, running or paused."""

    code = "automation_job_busy"
    status = 409

    def __init__(self) -> None:
        super().__init__("the job's previous run is still queued, running or paused")


class AutomationJobNameTaken(DomainError):
    """The owner has a job of this name already (a job's runs name it)."""

    code = "automation_job_name_taken"
    status = 409

    def __init__(self, name: str) -> None:
        super().__init__(f"a job named {json.dumps(name)} exists already")


class MultitaskInvalid(DomainError):
    """A request names a multitask strategy (what a new run does on a busy thread) that is
    not one of ``MultitaskStrategy``'s."""

    code = "invalid_multitask"
    status = 400

    def __init__(self, field: str, *, status: int = 400) -> None:
        super().__init__(f"{field} must be one of: reject, enqueue, interrupt, rollback")
        self.field = field
        self.status = status
