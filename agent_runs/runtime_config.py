"""Which tools and context a run's stages get, by runtime mode (spec/run-agent-input.md,
"运行模式说明"): ``chat`` from ``system_agents.yaml``, ``automation`` from the run's
``AutomationJob``. A run in automation mode names its job in ``RunAgentInput.context`` as
``{"description": "automation_job", "value": "<job name>"}`` (``forwardedProps`` allows no
other keys)."""

from functools import cache
from pathlib import Path
from typing import Any

import yaml
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from pydantic import BaseModel, ConfigDict, ValidationError

from agent_runs.models import AutomationJob, Run

AUTOMATION_JOB_CONTEXT = "automation_job"
BUILT_IN_TOOLS = ("calendar_create", "calendar_list", "calendar_update", "calendar_delete")


class StageConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    enabled_tools: list[str] = []
    context: str = ""

    def model_post_init(self, __context: Any) -> None:
        unknown = sorted(set(self.enabled_tools) - set(BUILT_IN_TOOLS))
        if unknown:
            raise ValueError(f"unknown tools {unknown}; known: {list(BUILT_IN_TOOLS)}")


class SystemAgents(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agents: dict[str, StageConfig]


@cache
def system_agents(path: Path | None = None) -> SystemAgents:
    """``system_agents.yaml``, validated; a bad file is an ``ImproperlyConfigured`` naming
    the file and the problem."""
    path = path or Path(settings.AGENT_SYSTEM_AGENTS_FILE)
    try:
        data = yaml.safe_load(path.read_text())
        return SystemAgents.model_validate(data)
    except (OSError, yaml.YAMLError, ValidationError, ValueError) as exc:
        raise ImproperlyConfigured(f"{path}: {exc}") from exc


def stage_config(*, run: Run, stage: str) -> StageConfig:
    """The tools and context of one stage of this run."""
    if run.runtime_mode == Run.RuntimeMode.AUTOMATION:
        job = automation_job_for(run_input=run.input)
        try:
            return StageConfig.model_validate(job.config.get(stage, job.config))
        except (ValidationError, ValueError) as exc:
            raise ImproperlyConfigured(f"automation job {job.name!r}: {exc}") from exc
    return system_agents().agents.get(stage, StageConfig())


def automation_job_for(*, run_input: dict[str, Any]) -> AutomationJob:
    names = [
        item.get("value")
        for item in run_input.get("context", [])
        if item.get("description") == AUTOMATION_JOB_CONTEXT
    ]
    job = AutomationJob.objects.filter(name=names[0]).first() if names else None
    if job is None:
        raise ImproperlyConfigured(f"no automation job named {names[0] if names else None!r}")
    return job
