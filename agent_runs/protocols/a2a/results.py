"""JSON-RPC results in the shapes of the generation that asked: a method called by its 1.0
name answers the 1.0 objects as they are; by its 0.3 name, the 0.3 ones (``kind``, ``final``,
lower-case states), converted by the SDK's own ``a2a.compat.v0_3.conversions``.
docs/protocols/a2a.md, Methods."""

from typing import Any

from a2a.compat.v0_3 import conversions
from a2a.types.a2a_pb2 import StreamResponse, Task
from google.protobuf.json_format import ParseDict

from agent_runs.api.sse import sse_frame
from agent_runs.protocols.a2a.errors import RequestId
from agent_runs.protocols.a2a.inbound import RpcCall
from agent_runs.protocols.a2a.outbound import Wire


def rpc_result(call: RpcCall, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": call.request_id, "result": result}


def task_result(call: RpcCall, task: Wire) -> Any:
    """A ``Task`` as a result: as is in 1.0, the 0.3 ``Task`` (``kind: "task"``) in 0.3."""
    if not call.legacy:
        return task
    compat = conversions.to_compat_task(ParseDict(task, Task()))
    return compat.model_dump(mode="json", by_alias=True, exclude_none=True)


def send_result(call: RpcCall, task: Wire) -> Any:
    """``SendMessage``'s result: ``{task}`` in 1.0, the task itself in 0.3."""
    return task_result(call, task) if call.legacy else {"task": task}


def stream_frame(request_id: RequestId, legacy: bool, response: Wire) -> bytes:
    if legacy:
        compat = conversions.to_compat_stream_response(
            ParseDict(response, StreamResponse()), request_id
        )
        body = compat.model_dump(mode="json", by_alias=True, exclude_none=True)
    else:
        body = {"jsonrpc": "2.0", "id": request_id, "result": response}
    return sse_frame(None, body, named=False)
