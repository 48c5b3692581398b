"""The RQ worker for runs.

It imports the job module, and with it AgentScope, in the parent process before any fork,
and answers one prompt with the demo model there, so each work-horse starts with modules
loaded and AgentScope's lazy set-up done (DESIGN.md: RQ forks per job).
"""

import gc
import logging
from typing import Any

from django.conf import settings
from django.db import connections
from rq import Worker

import agent_runs.jobs  # noqa: F401 - preloaded on purpose, see the module docstring
from agent_runs.demo_model import DEMO_MODEL_ID
from agent_runs.execution import runs_recover
from agent_runs.llm import chat_model_for
from agent_runs.pipeline import WORKER_SYSTEM_PROMPT, conversation, iterate_async, worker_reply

logger = logging.getLogger(__name__)


class RunWorker(Worker):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        sweep = settings.AGENT_RUN_SWEEP_SECONDS
        kwargs["maintenance_interval"] = sweep
        # RQ waits for jobs for (worker_ttl - 15) s before its loop comes round to the
        # maintenance tasks: make that the sweep interval.
        kwargs["worker_ttl"] = min(kwargs.get("worker_ttl") or sweep + 15, sweep + 15)
        super().__init__(*args, **kwargs)

    def work(self, *args: Any, **kwargs: Any) -> bool:
        # A demo reply loads and exercises the code every run uses, before anything forks.
        model = chat_model_for(DEMO_MODEL_ID)
        reply = worker_reply(
            model=model,
            messages=conversation((), "warm-up"),
            tools=(),
            system_prompt=WORKER_SYSTEM_PROMPT,
            max_iters=1,
        )
        for _item in iterate_async(reply):
            pass
        # Closes the warm-up's database connections too, before anything forks.
        self._recover()
        # Move everything loaded so far out of the collector's reach: a work-horse's garbage
        # collections then leave the parent's pages alone instead of copying them.
        gc.collect()
        gc.freeze()
        return bool(super().work(*args, **kwargs))

    def run_maintenance_tasks(self) -> None:
        super().run_maintenance_tasks()
        self._recover()

    def _recover(self) -> None:
        failed, enqueued = runs_recover()
        if failed or enqueued:
            logger.info("recovered runs: %d failed, %d enqueued again", failed, enqueued)
        # A connection opened here must not be shared with forked work-horses, and a pool's
        # threads do not survive a fork: a work-horse lives for one job and connects plainly.
        connections.close_all()
        for connection in connections.all():
            close_pool = getattr(connection, "close_pool", None)  # PostgreSQL only
            if close_pool is not None:
                close_pool()
            connection.settings_dict["OPTIONS"].pop("pool", None)
