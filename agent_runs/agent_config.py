"""Which tools and context a run's stages get, by runtime mode (docs/spec/run-agent-input.md,
"运行模式说明"): ``chat`` from ``system_agents.yaml``, ``automation`` from the run's
``AutomationJob``. A run in automation mode names its job in ``RunAgentInput.context`` as
``{"description": "automation_job", "value": "<job name>"}`` (``forwardedProps`` allows no
other keys)."""

import os
import re
from collections.abc import Iterable
from functools import cache
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import yaml
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db.models import F, Q, Subquery
from django.utils.module_loading import import_string
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator, model_validator

from agent_runs.models import AutomationJob, Run, Stage, Thread

BUILT_IN_TOOLS = ("calendar_create", "calendar_list", "calendar_update", "calendar_delete")


# The built-in tools that write, which a person approves before they run in ``chat`` mode
# unless the configuration says otherwise (an unattended automation run asks for none).
APPROVAL_BY_DEFAULT_IN_CHAT = frozenset({"calendar_create", "calendar_update", "calendar_delete"})


class ToolEntry(BaseModel):
    """An enabled tool given as an object: its name, and whether a person must approve each
    call before it runs (``requires_approval``; unset: the mode's default)."""

    model_config = ConfigDict(extra="forbid")

    name: str
    requires_approval: bool | None = None


# The tools of MCP servers are offered as mcp__<server>__<tool> (AgentScope's names).
MCP_TOOL_PREFIX = "mcp__"


class McpServer(BaseModel):
    """An MCP tool server whose tools a stage is offered (docs/tools.md, "MCP tool
    servers"). No secret is written here: each header's value is read from the environment
    variable ``headers_from_env`` names. ``allowed_tools``: the only tools of the server's
    offered (unset: all of them). ``require_approval``: each call of its tools waits for a
    person's approval (an AG-UI interrupt)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    url: str
    transport: Literal["streamable_http", "sse"] = "streamable_http"
    headers_from_env: dict[str, str] = {}
    allowed_tools: list[str] | None = None
    require_approval: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        # Its tools are offered to the model as mcp__<name>__<tool>: a provider takes only
        # these characters in a tool's name.
        if not re.fullmatch(r"[A-Za-z0-9_-]+", name):
            raise ValueError(f"MCP server name {name!r}: only letters, digits, '_' and '-'")
        return name

    @field_validator("url")
    @classmethod
    def _url(cls, url: str) -> str:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.netloc:
            raise ValueError(f"MCP server url {url!r}: an http:// or https:// URL")
        return url

    @field_validator("headers_from_env")
    @classmethod
    def _headers(cls, headers: dict[str, str]) -> dict[str, str]:
        unset = sorted(variable for variable in headers.values() if variable not in os.environ)
        if unset:
            raise ValueError(f"headers_from_env names unset environment variables {unset}")
        return headers

    def headers(self) -> dict[str, str]:
        """The headers sent with each request to the server, their values from the
        environment."""
        return {
            header: os.environ.get(variable, "")
            for header, variable in self.headers_from_env.items()
        }


class StageConfig(BaseModel):
    """A stage's tools and context. Each enabled tool is a name, or an object naming it with
    its ``requires_approval`` (``{"name": "calendar_list", "requires_approval": true}``)."""

    model_config = ConfigDict(extra="forbid")

    enabled_tools: list[str] = []
    context: str = ""
    mcp_servers: list[McpServer] = []
    # Per tool given as an object, whether it requires approval.
    approval: dict[str, bool] = {}

    @model_validator(mode="before")
    @classmethod
    def _tool_entries(cls, data: Any) -> Any:
        """Tool objects become names, their ``requires_approval`` kept in ``approval``."""
        if not isinstance(data, dict) or not isinstance(data.get("enabled_tools"), list):
            return data
        names: list[Any] = []
        approval = dict(data.get("approval") or {})
        for entry in data["enabled_tools"]:
            if isinstance(entry, dict):
                tool = ToolEntry.model_validate(entry)
                names.append(tool.name)
                if tool.requires_approval is not None:
                    approval[tool.name] = tool.requires_approval
            else:
                names.append(entry)
        return {**data, "enabled_tools": names, "approval": approval}

    @field_validator("mcp_servers")
    @classmethod
    def _unique_servers(cls, servers: list[McpServer]) -> list[McpServer]:
        names = [server.name for server in servers]
        if len(set(names)) != len(names):
            raise ValueError(f"MCP server names must differ: {names}")
        return servers

    def requires_approval(self, name: str, *, runtime_mode: str) -> bool:
        """Whether a call of the tool waits for a person's approval: as configured, else
        the built-in tools that write do in ``chat`` mode."""
        if name in self.approval:
            return self.approval[name]
        return runtime_mode == Run.RuntimeMode.CHAT and name in APPROVAL_BY_DEFAULT_IN_CHAT

    def check_tools(self, known: Iterable[str]) -> None:
        unknown = sorted(set(self.enabled_tools) - set(known))
        if unknown:
            raise ValueError(f"unknown tools {unknown}; known: {sorted(known)}")


class SystemAgents(BaseModel):
    """``agents``: per stage, its tools and context. ``tools``: operator tools, by name, as
    the dotted path of a function (sync or async; its signature and docstring describe it to
    the model)."""

    model_config = ConfigDict(extra="forbid")

    agents: dict[str, StageConfig]
    tools: dict[str, str] = {}

    @property
    def known_tools(self) -> list[str]:
        return [*BUILT_IN_TOOLS, *self.tools]

    def model_post_init(self, __context: Any) -> None:
        for name, path in self.tools.items():
            if name in BUILT_IN_TOOLS:
                raise ValueError(f"operator tool {name!r} would hide the built-in tool")
            try:
                import_string(path)
            except ImportError as exc:
                raise ValueError(f"operator tool {name!r}: {exc}") from exc
        for name, stage in self.agents.items():
            stage.check_tools(self.known_tools)
            if stage.mcp_servers and name != "worker":
                raise ValueError(f"agents.{name}.mcp_servers: only the worker calls MCP tools")


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
        job = _automation_job(run)
        try:
            return _automation_stage(job.config, stage)
        except (ValidationError, ValueError) as exc:
            raise ImproperlyConfigured(f"automation job {job.name!r}: {exc}") from exc
    return system_agents().agents.get(stage, StageConfig())


def _automation_stage(config: dict[str, Any], stage: str) -> StageConfig:
    stage_config = StageConfig.model_validate(config.get(stage, config))
    stage_config.check_tools(system_agents().known_tools)
    return stage_config


def automation_config_check(config: Any) -> None:
    """``ValueError`` unless ``config`` gives every stage valid tools and context (for all
    stages, or per stage under the stage's name), as its runs will read it."""
    if not isinstance(config, dict):
        raise ValueError("an object: enabled_tools and context, for all stages or per stage")
    # The memory stage runs only when configured (``stage_enabled``).
    stages = [stage for stage in Stage.values if stage != Stage.MEMORY or stage in config]
    for stage in stages:
        try:
            _automation_stage(config, stage)
        except ValidationError as exc:
            problem = exc.errors()[0]
            where = ".".join(str(part) for part in problem["loc"])
            raise ValueError(f"{stage} stage: {where}: {problem['msg']}") from exc
        except ValueError as exc:
            raise ValueError(f"{stage} stage: {exc}") from exc


def stage_enabled(*, run: Run, stage: str) -> bool:
    """Whether an optional stage (``memory``) runs: it is configured for the run's agent
    (``agents.<stage>`` in system_agents.yaml, or ``<stage>`` in the automation job's
    config)."""
    if run.runtime_mode == Run.RuntimeMode.AUTOMATION:
        return stage in _automation_job(run).config
    return stage in system_agents().agents


def automation_job_get(*, name: str, owner_id: Any) -> AutomationJob | None:
    """The automation job of this name a run of ``owner_id``'s names: the user's own, else a
    shared one (no owner). Another user's job is never found."""
    if not name:
        return None
    jobs = AutomationJob.objects.filter(Q(owner_id=owner_id) | Q(owner__isnull=True), name=name)
    return jobs.order_by(F("owner_id").asc(nulls_last=True)).first()


def _automation_job(run: Run) -> AutomationJob:
    # The run's owner, read in the same query (a run being checked may have no thread yet).
    owner = Thread.objects.filter(pk=run.thread_id).values("owner_id")[:1]
    job = automation_job_get(name=run.automation_job, owner_id=Subquery(owner))
    if job is None:  # deleted since the run was accepted
        raise ImproperlyConfigured(f"no automation job named {run.automation_job!r}")
    return job
