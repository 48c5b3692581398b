"""Costs AgentScope 2.0 pays on every tool call, taken away without changing what it does.

A profile of a one-tool-call run on the instant demo model (docs/benchmarks.md, "Whole
runs") found much of the worker's CPU in these places:

- ``Agent._execute_tool_call`` validates each tool input with ``jsonschema.validate``, which
  first checks the *schema* against the JSON Schema meta-schema, on every call. Here a
  validator is built, and its schema checked, once per distinct schema; the input is
  validated exactly as before.
- The structured-output tool deep-copies its JSON schema on every look at it, and the agent
  looks many times a run (each listing of the available tools wraps every tool
  anew). Here the copy is made once per tool, that is once per reply.
- Each toolkit's meta tool (``ResetTools``) builds a pydantic model to describe the tool
  groups whenever its schema is read (several times a run). Here the schema is made once per
  set of groups: it depends on nothing else.
- ``FunctionTool`` derives a function's input schema from its signature and docstring (a
  pydantic model built each time) whenever it wraps one: every agent wraps its own
  context-compression method, and a run's tools are closures made anew each run from the
  same code. Here the schema is derived once per function code and docstring.
- The structured output of a model call (the router's) is checked like a tool input.
- Tool arguments (the worker's structured output, the router's decision) are parsed by
  ``_json_loads_with_repair``, which hands valid JSON to ``json_repair`` with the schema
  anyway, and ``json_repair`` prepares the schema for validation anew each time (about
  0.1 ms a call). Arguments that parse to an object the schema accepts are what
  ``json_repair`` would give back unchanged: here they are checked with a validator prepared
  as ``json_repair`` prepares it, once per schema, and returned; anything else goes the
  original way.
- A tool's description is parsed from its docstring whenever a function is wrapped (every
  agent wraps its own context-compression method): here once per docstring.
- Every AgentScope event, message and block gets an id from ``uuid4`` (about 130 a
  100-token reply, 3 µs each: a system call for the random bytes). Here an id is a random
  prefix drawn once per process (again after a fork) and a counter: as unique, the same
  32 hex digits.

``apply()`` is called by the worker when it starts (``RunWorker.__init__``), never as a
side effect of an import; it touches only AgentScope's own modules, not jsonschema or
pydantic for anyone else. tests/agent_runs/
test_agentscope_tuning.py checks each, and fails if an AgentScope upgrade moves what they
rely on.
"""

import inspect
import itertools
import json
import os
import uuid
from functools import lru_cache
from types import SimpleNamespace
from typing import Any

import jsonschema
from agentscope import set_id_factory
from agentscope._utils._common import _json_loads_with_repair
from agentscope.agent import _agent as agentscope_agent_module
from agentscope.agent._structured_output_tool import _GenerateStructuredOutput
from agentscope.model import _base as agentscope_model_module
from agentscope.tool import _adapters as agentscope_adapters_module
from agentscope.tool import _toolkit as agentscope_toolkit_module
from agentscope.tool._builtin import ResetTools
from agentscope.tool._utils import _extract_func_description, _extract_input_schema
from json_repair.schema_repair import SchemaRepairer, schema_from_input


@lru_cache(maxsize=256)
def _validator_for(schema_json: str) -> Any:
    schema = json.loads(schema_json)
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def validate(instance: Any, schema: dict[str, Any]) -> None:
    """``jsonschema.validate``, with the schema checked once rather than every call."""
    try:
        key = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError):  # not plain JSON: no key to cache it by
        jsonschema.validate(instance, schema)
        return
    error = jsonschema.exceptions.best_match(_validator_for(key).iter_errors(instance))
    if error is not None:
        raise error


class StructuredOutputTool(_GenerateStructuredOutput):
    """AgentScope's structured-output tool, with its input schema made once."""

    @property
    def input_schema(self) -> dict[str, Any]:  # type: ignore[override]
        cached: dict[str, Any] | None = self.__dict__.get("_input_schema")
        if cached is None:
            cached = self.__dict__["_input_schema"] = super().input_schema
        return cached


class MetaTool(ResetTools):
    """AgentScope's meta tool, with its input schema made once per set of tool groups."""

    _schemas: dict[tuple[tuple[str, str], ...], dict[str, Any]] = {}

    @property
    def input_schema(self) -> dict[str, Any]:  # type: ignore[override]
        key = tuple((group.name, group.description) for group in self.groups)
        schema = self._schemas.get(key)
        if schema is None:
            schema = self._schemas[key] = super().input_schema
        return schema


_INPUT_SCHEMAS: dict[tuple[Any, ...], dict[str, Any]] = {}


def extract_input_schema(tool_func: Any, *args: Any, **kwargs: Any) -> dict[str, Any]:
    """AgentScope's ``_extract_input_schema``, once per function code, defaults, annotations
    and docstring: what it reads. The schema is shared; AgentScope copies it before it
    changes a tool's schema."""
    function = inspect.unwrap(tool_func)
    code = getattr(function, "__code__", None)
    if code is None:  # a partial, a callable object: nothing to key on
        return _extract_input_schema(tool_func, *args, **kwargs)
    key = (
        code,
        tool_func.__doc__,
        repr(getattr(function, "__defaults__", None)),
        repr(getattr(function, "__kwdefaults__", None)),
        repr(getattr(function, "__annotations__", None)),
        args,
        tuple(sorted(kwargs.items())),
    )
    schema = _INPUT_SCHEMAS.get(key)
    if schema is None:
        schema = _INPUT_SCHEMAS[key] = _extract_input_schema(tool_func, *args, **kwargs)
    return schema


@lru_cache(maxsize=256)
def _repairer_for(schema_json: str) -> tuple[SchemaRepairer, Any]:
    """``json_repair``'s validation for a schema, made as ``repair_json`` makes it every
    call (the schema prepared, its validator class chosen, the schema checked), once."""
    schema = schema_from_input(json.loads(schema_json))
    repairer = SchemaRepairer(schema, None)
    repairer._get_root_validator()
    return repairer, schema


def json_loads_with_repair(json_str: str, schema: dict[str, Any] | None = None) -> dict[str, Any]:
    """AgentScope's ``_json_loads_with_repair``: arguments that parse to an object the schema
    accepts (as ``repair_json`` checks it) and that hold no NaN or infinity are returned as
    parsed, which is what it returns for them; anything else goes the original way."""
    if schema is not None:
        try:
            parsed = json.loads(json_str)
            if isinstance(parsed, dict):
                repairer, root = _repairer_for(json.dumps(schema, sort_keys=True))
                if repairer.is_valid(parsed, root):
                    json.dumps(parsed, allow_nan=False)
                    return parsed
        except (TypeError, ValueError, RecursionError):  # the original way says what is wrong
            pass
    return _json_loads_with_repair(json_str, schema)


extract_func_description = lru_cache(maxsize=256)(_extract_func_description)


class ProcessIds:
    """AgentScope's ids: 32 hex digits, a random prefix of 80 bits drawn per process (and
    again in a forked child) and a counter: unique within a process by the counter, across
    processes by the prefix, without a system call for each."""

    def __init__(self) -> None:
        self.reseed()

    def reseed(self) -> None:
        self._prefix = uuid.uuid4().hex[:20]
        self._counter = itertools.count()

    def __call__(self) -> str:
        return f"{self._prefix}{next(self._counter):012x}"


process_ids = ProcessIds()
_applied = False


def apply() -> None:
    global _applied
    checks = SimpleNamespace(validate=validate, ValidationError=jsonschema.ValidationError)
    setattr(agentscope_agent_module, "jsonschema", checks)  # noqa: B010 - a module's global
    setattr(agentscope_agent_module, "_GenerateStructuredOutput", StructuredOutputTool)  # noqa: B010
    setattr(agentscope_toolkit_module, "ResetTools", MetaTool)  # noqa: B010
    setattr(agentscope_adapters_module, "_extract_input_schema", extract_input_schema)  # noqa: B010
    setattr(agentscope_model_module, "jsonschema", checks)  # noqa: B010
    for module in (agentscope_agent_module, agentscope_toolkit_module, agentscope_model_module):
        setattr(module, "_json_loads_with_repair", json_loads_with_repair)  # noqa: B010
    setattr(agentscope_adapters_module, "_extract_func_description", extract_func_description)  # noqa: B010
    set_id_factory(process_ids)
    if not _applied:
        os.register_at_fork(after_in_child=process_ids.reseed)
        _applied = True
