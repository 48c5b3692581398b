"""A task's frames for the WebSocket ``/ws`` (consumers.py): the task's journal through the
edge kit's loop (``agent_runs/api/journal.py``), each event projected into frames by the
pure projection of outbound_ws.py, with the reads a batch needs first (the files of the steps
it finishes, the held runs its runs go on with). docs/protocols/agent-protocol-ws.md."""

import uuid
from collections.abc import AsyncGenerator, Mapping
from typing import Any

from agent_runs.api.journal import Event, journal_batches
from agent_runs.db import db_call
from agent_runs.events.reads import EventStreamStart
from agent_runs.protocols.agent_protocol.outbound_ws import (
    Frame,
    FrameCursor,
    FrameState,
    HeldRun,
    event_frames,
    finished_step_id,
)
from agent_runs.protocols.agent_protocol.selectors import held_runs_of
from agent_runs.selectors.steps import agent_files_of_steps


class _TaskFrames:
    """The edge kit's ``Translator`` over the projection: the frames of each event after the
    client's cursor (those up to it were sent before: they only prime the projection)."""

    ended = False  # a subscription follows the task until it is dropped

    def __init__(self, *, thread_id: uuid.UUID, cursor: FrameCursor, journal_begun: bool) -> None:
        self.thread_id = thread_id
        self.task_id = str(thread_id)
        self.cursor = cursor
        self.state = FrameState(journal_begun=journal_begun)
        self._finished: dict[int, str] = {}
        self._files: Mapping[str, Any] = {}
        self._held: Mapping[str, HeldRun] = {}

    async def prepare(self, batch: list[Event]) -> None:
        """Read the files of the steps the batch finishes and, for the runs it starts, the
        runs whose held reply they go on with (a RUN_STARTED says so: task.resumed)."""
        event_id = self.cursor.event_id
        self._finished = {
            event.id: step_id
            for event in batch
            if event.id >= event_id
            and (step_id := finished_step_id(task_id=self.task_id, payload=event.payload))
        }
        self._files = (
            await db_call(agent_files_of_steps, step_ids=set(self._finished.values()))
            if self._finished
            else {}
        )
        started = {
            event.run_id
            for event in batch
            if event.type == "RUN_STARTED" and event.run_id and event.id >= event_id
        }
        self._held = (
            await db_call(held_runs_of, thread_id=self.thread_id, run_ids=started)
            if started
            else {}
        )

    def translate(self, event: Event) -> list[Frame]:
        step_id = self._finished.get(event.id)
        frames = event_frames(
            task_id=self.task_id,
            event_id=event.id,
            at=event.at,
            payload=event.payload,
            state=self.state,
            artifacts=self._files.get(step_id, ()) if step_id else (),
            held=self._held.get(event.run_id or "") if event.type == "RUN_STARTED" else None,
        )
        sends = self.cursor.sends
        return [frame for number, frame in enumerate(frames, start=1) if sends(event.id, number)]


def task_frames(
    *, thread_id: uuid.UUID, after_id: int, cursor: FrameCursor, journal_begun: bool
) -> AsyncGenerator[list[Frame] | None, None]:
    """The frames of each batch of the task's journal after ``after_id``, live; ``None``
    while it is idle (a keep-alive is due)."""
    frames = _TaskFrames(thread_id=thread_id, cursor=cursor, journal_begun=journal_begun)
    return journal_batches(
        thread_id=thread_id,
        start=EventStreamStart(after_id=after_id, run_id=None, run_ended=False),
        translator=frames,
        prepare=frames.prepare,
        follow=True,
    )
