"""Domain errors of the run API; config/exceptions.py maps each to its HTTP status."""


class RunInputInvalid(Exception):
    """A RunAgentInput broke a rule of spec/run-agent-input.md; the message is the spec's."""


class RunPayloadTooLarge(RunInputInvalid):
    """The raw body is over the 256 KB limit (spec/run-agent-input.md, Validation Rules)."""

    def __init__(self) -> None:
        super().__init__("RunAgentInput payload exceeds size limit")


class RunIdConflict(Exception):
    """The runId already names a run of this thread with a different body."""

    def __init__(self) -> None:
        super().__init__("runId already exists in this thread with a different RunAgentInput")


class RunIdAmbiguous(Exception):
    """A runId names runs in several of the caller's threads: the request must say which."""

    def __init__(self) -> None:
        super().__init__("runId is used in several threads: pass threadId")


class RunNoLongerRunning(Exception):
    """The run was cancelled (or otherwise ended) while its job worked on it."""
