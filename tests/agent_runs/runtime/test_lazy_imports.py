"""A worker process loads less (agent_runs/runtime/lazy_imports.py and the ``rqworker``
command): what AgentScope imports but never calls is loaded only when used, and the URL
configuration (every protocol's views and SDKs) not at all. A worker, and daphne, keep
what they imported at start out of the garbage collector's sight (agent_runs/heap.py)."""

import importlib
import importlib.util
import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings

from agent_runs.runtime import lazy_imports
from tests.conftest import service_env


def seen() -> list[str]:
    imports: list[str] = getattr(sys, "probe_imports")  # noqa: B009 (mypy: set by the fixture)
    return imports


@pytest.fixture
def probe_package(tmp_path, monkeypatch):
    """A package whose import is seen: it appends to ``sys.probe_imports``."""
    package = tmp_path / "deferred_probe"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import sys\nsys.probe_imports.append(__name__)\nclass Thing:\n    pass\n"
    )
    (package / "sub.py").write_text("import sys\nsys.probe_imports.append(__name__)\nVALUE = 7\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(sys, "probe_imports", [], raising=False)
    yield "deferred_probe"
    for name in ("deferred_probe", "deferred_probe.sub"):
        sys.modules.pop(name, None)


def test_a_deferred_module_is_imported_at_its_first_use_and_then_is_the_real_one(probe_package):
    with lazy_imports.deferred(probe_package):
        stand_in = importlib.import_module(probe_package)
        again = importlib.import_module(probe_package)  # a second import loads nothing
        assert importlib.util.find_spec(probe_package) is not None
    assert seen() == []
    assert probe_package not in sys.modules  # unused: nobody else sees it

    thing = stand_in.Thing
    assert seen() == ["deferred_probe"]
    real = sys.modules[probe_package]
    assert real is not stand_in and thing is real.Thing and again.Thing is real.Thing
    assert stand_in.Thing is thing
    assert seen() == ["deferred_probe"]  # once


def test_importing_a_submodule_of_a_deferred_package_imports_the_package(probe_package):
    with lazy_imports.deferred(probe_package):
        sub = importlib.import_module(f"{probe_package}.sub")
    assert sub.VALUE == 7
    assert seen() == ["deferred_probe", "deferred_probe.sub"]


def test_a_module_imported_already_or_missing_is_left_alone(probe_package):
    loaded = importlib.import_module(probe_package)
    with lazy_imports.deferred(probe_package, "no_such_module_anywhere"):
        assert sys.modules[probe_package] is loaded
    assert "no_such_module_anywhere" not in sys.modules


WORKER_PROBE = textwrap.dedent(
    """
    import json, sys
    import django
    django.setup()
    from django.core.management import call_command
    call_command("rqworker", sys.argv[1], burst=True, skip_checks=False)
    from django.db import connection
    with connection.cursor() as cursor:  # psycopg looks for numpy in sys.modules
        cursor.execute("SELECT %s", [1])
    loaded = {
        name: name in sys.modules
        for name in (
            "openai",
            "numpy",
            "agentscope",
            "agent_runs.protocols.openai_responses.views",
            # The SDKs of the anthropic/, gemini/, ollama/ and litellm/ models: only when
            # such a model is configured.
            "anthropic",
            "google.genai",
            "ollama",
            "litellm",
        )
    }
    import openai  # used after all: the real module
    loaded["openai_works"] = openai.APIError.__module__ == "openai"
    import gc
    loaded["frozen"] = gc.get_freeze_count() > 100_000
    loaded["young_threshold"] = gc.get_threshold()[0]
    print(json.dumps(loaded))
    """
)


def probe(code: str, *args: str) -> Any:
    """What ``code``, run by a new Python on the test database and Redis, prints last (JSON)."""
    env = service_env(REDIS_URL=settings.REDIS_URL, DJANGO_SETTINGS_MODULE="config.settings")
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=Path(settings.BASE_DIR),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_the_worker_command_loads_neither_the_url_configuration_nor_what_agentscope_does_not_use():
    assert probe(WORKER_PROBE, settings.AGENT_RUNS_QUEUE) == {
        "openai": False,
        "numpy": False,
        "agentscope": True,  # the worker's pipeline is imported
        "agent_runs.protocols.openai_responses.views": False,
        "anthropic": False,
        "google.genai": False,
        "ollama": False,
        "litellm": False,
        "openai_works": True,
        "frozen": True,
        "young_threshold": 10_000,
    }


def test_daphnes_application_freezes_its_startup_heap_with_the_url_configuration_loaded():
    code = (
        "import gc, json, sys\n"
        "import config.asgi\n"
        "print(json.dumps([gc.get_freeze_count() > 100_000, gc.get_threshold()[0],"
        " 'agent_runs.protocols.openai_responses.views' in sys.modules]))\n"
    )
    assert probe(code) == [True, 10_000, True]
