"""The RQ worker for runs.

It imports the job module, and with it AgentScope, in the parent process before any fork,
and answers one prompt with the demo model there, so each work-horse starts with modules
loaded and AgentScope's lazy set-up done (DESIGN.md: RQ forks per job).
"""

import gc
import logging
from typing import Any

from django.db import connections
from rq import Worker

import agent_runs.jobs  # noqa: F401 - preloaded on purpose, see the module docstring
from agent_runs.demo_model import DemoChatModel
from agent_runs.execution import runs_recover
from agent_runs.pipeline import iterate_async, worker_reply

logger = logging.getLogger(__name__)


class RunWorker(Worker):
    def work(self, *args: Any, **kwargs: Any) -> bool:
        for _item in iterate_async(worker_reply(user_text="warm-up", model=DemoChatModel())):
            pass
        failed, enqueued = runs_recover()
        if failed or enqueued:
            logger.info("recovered runs: %d failed, %d threads re-enqueued", failed, enqueued)
        # A connection opened here must not be shared with forked work-horses, and a pool's
        # threads do not survive a fork: a work-horse lives for one job and connects plainly.
        connections.close_all()
        for connection in connections.all():
            close_pool = getattr(connection, "close_pool", None)  # PostgreSQL only
            if close_pool is not None:
                close_pool()
            connection.settings_dict["OPTIONS"].pop("pool", None)
        # Move everything loaded so far out of the collector's reach: a work-horse's garbage
        # collections then leave the parent's pages alone instead of copying them.
        gc.collect()
        gc.freeze()
        return bool(super().work(*args, **kwargs))
