"""``rqworker``: django-rq's command, lighter for a process that serves no HTTP.

- Django's URL checks are left out: they import the URL configuration, that is every
  protocol's views and the SDKs they build their frames with (the openai and a2a types,
  drf-spectacular), about 28 MiB in each worker process for nothing. Every other check runs
  as before.
- The libraries AgentScope imports but the worker never calls are loaded only if used
  (runtime/lazy_imports.py), about 36 MiB more: the worker's class, and with it the
  pipeline and AgentScope, is imported before django-rq's command runs.
- What it imported is then out of the garbage collector's sight (agent_runs/heap.py).

``agent_runs`` comes before ``django_rq`` in ``INSTALLED_APPS``, so this is the command
``manage.py rqworker`` runs.
"""

from collections.abc import Sequence
from typing import Any

from django.apps import AppConfig
from django.conf import settings
from django.core import checks
from django.utils.module_loading import import_string
from django_rq.management.commands.rqworker import Command as RQWorkerCommand

from agent_runs.heap import freeze_startup_heap
from agent_runs.runtime import lazy_imports


class Command(RQWorkerCommand):
    def check(
        self,
        app_configs: Sequence[AppConfig] | None = None,
        tags: Sequence[str] | None = None,
        display_num_errors: bool = False,
        include_deployment_checks: bool = False,
        fail_level: int = checks.ERROR,
        databases: Sequence[str] | None = None,
    ) -> None:
        if tags is None:
            tags = sorted(set(checks.registry.registry.tags_available()) - {checks.Tags.urls})
        super().check(
            app_configs,
            tags,
            display_num_errors,
            include_deployment_checks,
            fail_level,
            databases,
        )

    def handle(self, *args: Any, **options: Any) -> None:
        with lazy_imports.deferred(*lazy_imports.WORKER_UNUSED):
            import_string(options.get("worker_class") or settings.RQ["WORKER_CLASS"])
            import_string("agent_runs.runtime.jobs.run_execute_job")
        freeze_startup_heap()
        super().handle(*args, **options)
