"""The run core's models, one module per aggregate; every model is importable from here
(``from agent_runs.models import Run``), as Django finds them."""

from agent_runs.models.automations import AutomationJob
from agent_runs.models.events import RunEvent
from agent_runs.models.interrupts import Interrupt
from agent_runs.models.messages import Message
from agent_runs.models.profiles import CalendarEvent, UserMemory, UserProfile
from agent_runs.models.push import PushConfig, PushDelivery
from agent_runs.models.runs import RUN_ACTIVE_STATUSES, RUN_ENDED_STATUSES, Run
from agent_runs.models.steps import Artifact, Step, agent_step_id
from agent_runs.models.threads import MultitaskStrategy, Stage, Thread, Visibility
from agent_runs.models.tokens import ApiToken
from agent_runs.models.workers import WorkerBeat

__all__ = [
    "RUN_ACTIVE_STATUSES",
    "RUN_ENDED_STATUSES",
    "ApiToken",
    "Artifact",
    "AutomationJob",
    "CalendarEvent",
    "Interrupt",
    "Message",
    "MultitaskStrategy",
    "PushConfig",
    "PushDelivery",
    "Run",
    "RunEvent",
    "Stage",
    "Step",
    "Thread",
    "UserMemory",
    "UserProfile",
    "Visibility",
    "WorkerBeat",
    "agent_step_id",
]
