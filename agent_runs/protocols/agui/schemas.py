"""AG-UI response shapes of the run API (docs/spec/run-agent-input.md, Response)."""

from typing import Any

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel

from agent_runs.models import Run


class TaskAcceptedResponse(BaseModel):
    model_config = ConfigDict(alias_generator=to_camel, populate_by_name=True, frozen=True)

    task_id: str
    thread_id: str
    run_id: str
    created: bool

    def to_wire(self) -> dict[str, Any]:
        data: dict[str, Any] = self.model_dump(mode="json", by_alias=True)
        return data


def task_accepted_response(*, run: Run) -> TaskAcceptedResponse:
    return TaskAcceptedResponse(
        task_id=str(run.task_id),
        thread_id=str(run.thread_id),
        run_id=run.run_id,
        created=run.created_thread,
    )
