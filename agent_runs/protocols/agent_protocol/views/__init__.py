"""The Agent Protocol's views (docs/protocols/agent-protocol.md): two URL sets over one core,
the spec set under ``/api/`` (spec.py) and the official v1 set under ``/ap/v1/agent/``
(v1.py), and what both use here: their base view (errors in the protocol's shape,
errors.py), the caller's task, an artifact's upload and its file."""

from collections.abc import Callable
from typing import Any

from django.db.models import QuerySet
from django.http import FileResponse
from rest_framework.request import Request

from agent_runs import ports
from agent_runs.api.authentication import request_user
from agent_runs.api.json_input import JsonBodyParser
from agent_runs.api.views import ProtocolView
from agent_runs.models import Artifact, Step, Thread
from agent_runs.protocols.agent_protocol.errors import BodyInvalid, render
from agent_runs.protocols.agent_protocol.inbound import page_query, uuid_or_404
from agent_runs.protocols.agent_protocol.selectors import TaskStep, task_get, task_step_get
from agent_runs.selectors.steps import NumberedPage, numbered_page
from agent_runs.services.artifacts import artifact_upload

__all__ = [
    "AgentProtocolApi",
    "artifact_file_response",
    "rows_page",
    "spec_download_url",
    "task_for_request",
    "task_step_for_request",
    "upload",
]


class AgentProtocolApi(ProtocolView):
    """The base of the package's API views: JSON bodies, errors in the protocol's shape, and
    what a 404 says (``not_found``)."""

    error_renderer = staticmethod(render)
    parser_classes = [JsonBodyParser]
    not_found = "task not found"


def task_for_request(request: Request, task_id: str) -> Thread:
    """The caller's task ``task_id`` names, annotated for its status (a 404 otherwise)."""
    return task_get(user=request_user(request), thread_id=uuid_or_404(task_id))


def upload(request: Request, *, thread: Thread, step: Step | None) -> Artifact:
    """The multipart upload of a request (``file``, ``relative_path``) as an artifact."""
    file = request.FILES.get("file")
    if file is None:
        raise BodyInvalid("invalid body: file: a file is required (multipart/form-data)")
    relative_path = request.POST.get("relative_path") or ""
    if not isinstance(relative_path, str):
        raise BodyInvalid("invalid body: relative_path: must be text")
    return artifact_upload(thread=thread, step=step, file=file, relative_path=relative_path)


def artifact_file_response(artifact: Artifact, *, content_type: str | None = None) -> FileResponse:
    """The stored file, streamed: ``Content-Type``, ``Content-Disposition: attachment`` with
    its name, ``Content-Length``."""
    response = FileResponse(
        ports.attachments().object_open(name=artifact.storage_name),
        as_attachment=True,
        filename=artifact.file_name,
        content_type=content_type or artifact.mime_type,
    )
    response["Content-Length"] = str(artifact.size_bytes)
    return response


def rows_page(
    request: Request,
    rows: QuerySet[Any] | Callable[[int, int], NumberedPage[Any]],
    *,
    page_key: str,
    size_key: str,
    default_size: int,
) -> NumberedPage[Any]:
    """The page of ``rows`` (a query, or what reads a page by number and size) the request
    asks for by ``page_key`` and ``size_key``."""
    number, size = page_query(
        request.query_params, page_key=page_key, size_key=size_key, default_size=default_size
    )
    if isinstance(rows, QuerySet):
        return numbered_page(rows, number=number, size=size)
    return rows(number, size)


def spec_download_url(request: Request, artifact: Artifact) -> str:
    """Where the spec set serves an artifact's file."""
    step = f"steps/{artifact.step_id}/" if artifact.step_id else ""
    return request.build_absolute_uri(
        f"/api/tasks/{artifact.thread_id}/{step}artifacts/{artifact.pk}/download"
    )


def task_step_for_request(request: Request, task_id: str, step_id: str) -> TaskStep:
    """The step ``step_id`` names of the caller's task (an approval, or a row of its own)."""
    thread = task_for_request(request, task_id)
    return task_step_get(thread=thread, step_id=uuid_or_404(step_id))
