"""Libraries a worker process has no use for, loaded only if something does use them.

AgentScope imports, when it is imported, two libraries the worker never calls: ``openai``
(for its Responses API model and its classifier; the models here speak the wire format
themselves, runtime/openai_compatible.py) and ``numpy`` (for its realtime audio). Together
they are about 36 MiB of each worker process. While the worker's code is imported inside
``deferred()``, ``import openai`` binds a stand-in module and costs nothing; the first read
of an attribute the stand-in lacks (``openai.AsyncClient``) imports the real module, whole
and unchanged, which from then on answers for the stand-in too.

When the block ends, the stand-ins that were not used leave ``sys.modules`` (whoever
imported one keeps it): libraries that look there to see whether a module is in use find
nothing (psycopg checks every integer parameter against ``numpy.integer`` once numpy is in
``sys.modules``), and a later ``import numpy`` imports the real module.

(The standard library's ``importlib.util.LazyLoader`` loads its module on any attribute
read, and on Python 3.11 the ``import`` statement itself reads ``__spec__``: a second
``import openai`` would load it.)

The worker's command (management/commands/rqworker.py) imports the worker in this block;
nothing else uses it.
"""

import importlib
import importlib.util
import sys
import threading
import types
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

WORKER_UNUSED = ("openai", "numpy")

_loading = threading.RLock()


class DeferredModule(types.ModuleType):
    """Stands for a module not imported yet; its ``__spec__`` is the real one's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(_load(self), name)


@contextmanager
def deferred(*names: str) -> Iterator[None]:
    """Within the block, importing one of the named top-level modules (unless it is imported
    already, or missing) binds a stand-in."""
    stand_ins: list[DeferredModule] = []
    for name in names:
        spec = None if name in sys.modules or "." in name else importlib.util.find_spec(name)
        if spec is not None:
            stand_in = DeferredModule(name)
            stand_in.__spec__ = spec
            sys.modules[name] = stand_in
            stand_ins.append(stand_in)
    try:
        yield
    finally:
        with _loading:
            for stand_in in stand_ins:
                if sys.modules.get(stand_in.__name__) is stand_in:
                    del sys.modules[stand_in.__name__]


def _load(stand_in: DeferredModule) -> types.ModuleType:
    name = stand_in.__name__
    with _loading:
        if sys.modules.get(name) is stand_in:
            del sys.modules[name]  # so that the import below runs the module
        module = importlib.import_module(name)
        # Whoever bound the stand-in reads the real module's names from now on.
        stand_in.__dict__.update(module.__dict__)
    return module
