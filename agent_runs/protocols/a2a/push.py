"""A2A push notifications: the task push notification config methods (1.0
``Create/Get/List/DeleteTaskPushNotificationConfig``, 0.3 ``tasks/pushNotificationConfig/
{set,get,list,delete}``) on the run core's outbox (agent_runs/push/services.py), and the
notifier that writes a task's notifications (agent_runs/push/receivers.py) in the
transaction of each change of its state. docs/protocols/a2a.md, Push notifications; docs/push.md.

A config is the SDK's ``TaskPushNotificationConfig``; its ``id`` defaults to the task id, as
the SDK's server does (``normalize_push_notification_config``). Each notification is a 1.0
``StreamResponse``, as the SDK's own sender posts: ``statusUpdate`` ``TASK_STATE_WORKING``
when a run of the task starts, then the whole ``task`` when it completes, asks for input,
fails or is canceled. The client's ``token`` comes back in ``X-A2A-Notification-Token``."""

from typing import Any, cast

from a2a.compat.v0_3 import conversions
from a2a.types.a2a_pb2 import (
    DeleteTaskPushNotificationConfigRequest,
    GetTaskPushNotificationConfigRequest,
    ListTaskPushNotificationConfigsRequest,
    TaskPushNotificationConfig,
)
from a2a.utils.errors import InvalidParamsError
from django.contrib.auth.models import AbstractBaseUser
from google.protobuf.json_format import MessageToDict

from agent_runs.models import PushConfig, Run
from agent_runs.protocols.a2a.inbound import RpcCall
from agent_runs.protocols.a2a.outbound import (
    CANCELED,
    COMPLETED,
    FAILED,
    WORKING,
    Wire,
    wire_stream_response,
)
from agent_runs.protocols.a2a.selectors import (
    PROTOCOL,
    task_runs,
    task_runs_of_run,
    task_snapshot,
)
from agent_runs.push.selectors import (
    push_config_get_for_task,
    push_configs_for_task,
)
from agent_runs.push.services import push_config_create, push_config_delete, push_enqueue

# The header a2a-sdk's sender puts the config's token in (BasePushNotificationSender).
TOKEN_HEADER = "X-A2A-Notification-Token"
_MAX_URL = 2048
_MAX_TOKEN = 512
_MAX_ID = 128

# The task states a run's status is pushed as; queued and paused are not pushed.
_PUSHED_STATES = {
    Run.Status.RUNNING: WORKING,
    Run.Status.COMPLETED: COMPLETED,
    Run.Status.FAILED: FAILED,
    Run.Status.CANCELLED: CANCELED,
}


# --- Notifications ----------------------------------------------------------------------


def task_push_notify(*, run: Run, status: Run.Status, configs: list[PushConfig]) -> None:
    """The notifier ``PUSH_NOTIFIERS`` names for A2A (agent_runs/push/receivers.py): the
    change of the run's task, one outbox row per config, in the transaction of the change."""
    push_enqueue(configs=configs, body=task_push_body(run=run, state=_PUSHED_STATES[status]))


def task_push_body(*, run: Run, state: str) -> Wire:
    """The notification of the run's task now in ``state``: a ``statusUpdate`` when it
    works, else the whole ``Task`` (its answer, or its question when the run completed by
    asking one: the state its rows give before its journal's last event is written)."""
    if state == WORKING:
        status = {"state": WORKING}
        update = {"taskId": run.parent_run_id or run.run_id, "contextId": str(run.thread_id)}
        return wire_stream_response({"statusUpdate": {**update, "status": status}})
    projection = task_snapshot(runs=task_runs_of_run(run=run)).projection
    return wire_stream_response({"task": projection.task()})


# --- Config methods ---------------------------------------------------------------------


def push_config_call(*, user: AbstractBaseUser, call: RpcCall) -> Any:
    """The result of a push notification config method, in the caller's generation's shape;
    a task that is not the caller's is ``TaskNotFoundError``."""
    if call.method == "CreateTaskPushNotificationConfig":
        params = cast(TaskPushNotificationConfig, call.params)
        runs = task_runs(user=user, task_id=params.task_id)
        return _config_result(call, task_push_config_create(run=runs[0], config=params))
    if call.method == "ListTaskPushNotificationConfigs":
        listed = cast(ListTaskPushNotificationConfigsRequest, call.params)
        task_id = task_runs(user=user, task_id=listed.task_id)[0].run_id
        configs = push_configs_for_task(user=user, protocol=PROTOCOL, task_ref=task_id)
        results = [_config_result(call, config) for config in configs]
        return results if call.legacy else {"configs": results}
    named = cast(
        GetTaskPushNotificationConfigRequest | DeleteTaskPushNotificationConfigRequest,
        call.params,
    )
    task_id = task_runs(user=user, task_id=named.task_id)[0].run_id
    config = push_config_get_for_task(
        user=user, protocol=PROTOCOL, task_ref=task_id, config_ref=named.id or task_id
    )
    if call.method == "GetTaskPushNotificationConfig":
        return _config_result(call, config)
    push_config_delete(config=config)
    return None


def task_push_config_create(*, run: Run, config: TaskPushNotificationConfig) -> PushConfig:
    """Register (or replace, by id) where the task begun by ``run`` is pushed; the URL is
    checked (``PushUrlRefused``: invalid params)."""
    if not config.url:
        raise InvalidParamsError(message="'url' is required")
    if config.HasField("authentication"):
        raise InvalidParamsError(
            message="'authentication' is not supported: the deliveries carry the config's "
            f"'token' in {TOKEN_HEADER} and are signed (X-Push-Signature)"
        )
    for name, value, limit in (
        ("url", config.url, _MAX_URL),
        ("token", config.token, _MAX_TOKEN),
        ("id", config.id, _MAX_ID),
    ):
        if len(value) > limit:
            raise InvalidParamsError(message=f"'{name}' is longer than {limit} characters")
    return push_config_create(
        thread=run.thread,
        protocol=PROTOCOL,
        task_ref=run.run_id,
        url=config.url,
        config_ref=config.id or run.run_id,
        token=config.token,
        token_header=TOKEN_HEADER,
    )


def _config_result(call: RpcCall, config: PushConfig) -> Any:
    message = TaskPushNotificationConfig(
        id=config.config_ref, task_id=config.task_ref, url=config.url, token=config.token
    )
    if call.legacy:
        compat = conversions.to_compat_task_push_notification_config(message)
        return compat.model_dump(mode="json", by_alias=True, exclude_none=True)
    return MessageToDict(message)
