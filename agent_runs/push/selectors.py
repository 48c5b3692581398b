"""Reads of push notification configs and deliveries (docs/push.md). A config that is not
the caller's is a 404, never a 403."""

import uuid

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import F, QuerySet
from django.http import Http404

from agent_runs.models import PushConfig, PushDelivery, Run


def push_configs_for_task(
    *, user: AbstractBaseUser, protocol: str, task_ref: str
) -> QuerySet[PushConfig]:
    """The caller's configs of one task of a protocol, oldest first."""
    return PushConfig.objects.filter(
        owner_id=user.pk, protocol=protocol, task_ref=task_ref
    ).order_by("created_at", "id")


def push_config_get_for_user(*, user: AbstractBaseUser, config_id: uuid.UUID) -> PushConfig:
    config = PushConfig.objects.filter(owner_id=user.pk, pk=config_id).first()
    if config is None:
        raise Http404("push notification config not found")
    return config


def push_config_get_for_task(
    *, user: AbstractBaseUser, protocol: str, task_ref: str, config_ref: str = ""
) -> PushConfig:
    """One of the caller's configs of a task by the protocol's id for it (A2A's
    ``tasks/pushNotificationConfig/get``: a task id and a config id); else a 404."""
    config = PushConfig.objects.filter(
        owner_id=user.pk, protocol=protocol, task_ref=task_ref, config_ref=config_ref
    ).first()
    if config is None:
        raise Http404("push notification config not found")
    return config


def push_configs_for_run(*, run: Run, protocol: str) -> QuerySet[PushConfig]:
    """The configs a protocol registered on the run's thread, for its owner: what a
    ``run_status_changed`` receiver pushes to (inside the transaction it was sent in)."""
    return PushConfig.objects.filter(
        thread_id=run.thread_id, owner_id=F("thread__owner_id"), protocol=protocol
    ).order_by("created_at", "id")


def push_deliveries_for_config(
    *, user: AbstractBaseUser, config_id: uuid.UUID
) -> QuerySet[PushDelivery]:
    """The deliveries of one of the caller's configs, newest first (a stranger's: none)."""
    return PushDelivery.objects.filter(config_id=config_id, config__owner_id=user.pk).order_by(
        "-created_at"
    )
