"""The threads-and-runs REST endpoints (docs/protocols/agui.md, Threads and runs): the caller's
threads and runs, read a page at a time, and a thread's deletion; and the caller's interrupts
(docs/protocols/agui.md, ``GET /api/v1/agent/interrupts``)."""

import uuid

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, extend_schema
from rest_framework import status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runs.api.authentication import request_user
from agent_runs.api.ids import run_id_or_404, thread_id_or_404
from agent_runs.api.json_input import JsonBodyParser
from agent_runs.api.openapi import error_responses
from agent_runs.models import Interrupt
from agent_runs.resources.errors import PageQueryInvalid
from agent_runs.resources.inbound import (
    INTERRUPT_CURSOR,
    RUN_CURSOR,
    THREAD_CURSOR,
    interrupt_cursor,
    interrupt_position,
    parse_page_query,
    run_cursor,
    run_position,
    thread_cursor,
    thread_position,
)
from agent_runs.resources.openapi import THREAD_ID_QUERY, page_parameters
from agent_runs.resources.outbound import (
    InterruptAnswerSerializer,
    InterruptDetailSerializer,
    InterruptPageSerializer,
    RunDetailSerializer,
    RunPageSerializer,
    ThreadDetailSerializer,
    ThreadPageSerializer,
)
from agent_runs.selectors.interrupts import (
    InterruptPosition,
    interrupt_detail,
    interrupt_get_for_user,
    interrupt_listed,
    interrupts_page_for_user,
)
from agent_runs.selectors.runs import thread_get_for_user
from agent_runs.selectors.threads import (
    RunPosition,
    ThreadPosition,
    run_detail_get_for_user,
    runs_page_of_thread,
    thread_detail_get_for_user,
    threads_page_for_user,
)
from agent_runs.selectors.usage import run_usage_summary
from agent_runs.services.interrupts import interrupt_answer
from agent_runs.services.threads import thread_delete

_PAGE_ERRORS = error_responses(400, 401, e400="A limit or cursor this API cannot read")
_STATUSES = ", ".join(Interrupt.Status.values)


class ThreadListApi(APIView):
    """``GET /api/v1/agent/threads?limit=&cursor=``: the caller's threads, latest activity
    first."""

    @extend_schema(
        operation_id="threads_list",
        summary="The caller's threads",
        description="Latest activity first: a message stored or a run ended. Keyset pages.",
        tags=["threads"],
        parameters=page_parameters(THREAD_CURSOR),
        responses={200: ThreadPageSerializer, **_PAGE_ERRORS},
    )
    def get(self, request: Request) -> Response:
        query = parse_page_query(request.query_params)
        page = threads_page_for_user(
            user=request_user(request),
            after=thread_position(query.cursor) if query.cursor else None,
            limit=query.limit,
        )
        last = page.items[-1] if page.has_more else None
        next_cursor = thread_cursor(ThreadPosition(last.updated_at, last.id)) if last else None
        return Response(ThreadPageSerializer({"threads": page.items, "next": next_cursor}).data)


class ThreadDetailApi(APIView):
    """``GET /api/v1/agent/threads/{thread_id}``: the thread; ``DELETE``: the thread and what
    it holds (its running or queued runs cancelled first)."""

    @extend_schema(
        operation_id="threads_retrieve",
        summary="A thread",
        tags=["threads"],
        responses={200: ThreadDetailSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, thread_id: uuid.UUID) -> Response:
        thread = thread_detail_get_for_user(user=request_user(request), thread_id=thread_id)
        return Response(ThreadDetailSerializer(thread).data)

    @extend_schema(
        operation_id="threads_destroy",
        summary="Delete a thread",
        description="Its running or queued runs are cancelled first; then its messages, runs, "
        "events, the calendar events its runs made and the attachments only it names go. "
        "Usage records stay.",
        tags=["threads"],
        responses={204: None, **error_responses(401, 403, 404)},
    )
    def delete(self, request: Request, thread_id: uuid.UUID) -> Response:
        thread_delete(thread=thread_get_for_user(user=request_user(request), thread_id=thread_id))
        return Response(status=status.HTTP_204_NO_CONTENT)


class ThreadRunListApi(APIView):
    """``GET /api/v1/agent/threads/{thread_id}/runs?limit=&cursor=``: the thread's runs,
    newest first."""

    @extend_schema(
        operation_id="threads_runs_list",
        summary="A thread's runs",
        description="Newest first. Keyset pages.",
        tags=["threads"],
        parameters=page_parameters(RUN_CURSOR),
        responses={200: RunPageSerializer, **_PAGE_ERRORS, **error_responses(404)},
    )
    def get(self, request: Request, thread_id: uuid.UUID) -> Response:
        query = parse_page_query(request.query_params)
        after = run_position(query.cursor) if query.cursor else None
        thread = thread_get_for_user(user=request_user(request), thread_id=thread_id)
        page = runs_page_of_thread(thread=thread, after=after, limit=query.limit)
        last = page.items[-1] if page.has_more else None
        next_cursor = run_cursor(RunPosition(last.created_at, last.pk)) if last else None
        return Response(RunPageSerializer({"runs": page.items, "next": next_cursor}).data)


class RunDetailApi(APIView):
    """``GET /api/v1/agent/runs/{run_id}?threadId=``: the run with its usage and cost;
    ``threadId`` picks the thread when the caller used the runId in several."""

    @extend_schema(
        operation_id="runs_retrieve",
        summary="A run, with its usage and cost",
        tags=["runs"],
        parameters=[THREAD_ID_QUERY],
        responses={
            200: RunDetailSerializer,
            **error_responses(
                401, 404, 409, e409="The runId names runs of several threads: pass threadId"
            ),
        },
    )
    def get(self, request: Request, run_id: str) -> Response:
        thread_id = request.query_params.get("threadId")
        run = run_detail_get_for_user(
            user=request_user(request),
            run_id=run_id_or_404(run_id),
            thread_id=thread_id_or_404(thread_id) if thread_id is not None else None,
        )
        usage = run_usage_summary(run=run)
        return Response(RunDetailSerializer(run, context={"usage": usage}).data)


class InterruptListApi(APIView):
    """``GET /api/v1/agent/interrupts?threadId=&status=&limit=&cursor=``: the caller's
    interrupts (of one thread, or of all), newest first; the pending ones by default."""

    @extend_schema(
        operation_id="interrupts_list",
        summary="The caller's interrupts",
        description="The tool calls the caller's runs stopped on, waiting for an answer, as "
        "AG-UI 1.0's `Interrupt` with their thread, run and status; newest first. Keyset pages.",
        tags=["interrupts"],
        parameters=[
            OpenApiParameter(
                "threadId",
                OpenApiTypes.UUID,
                description="Only this thread's (a thread not the caller's is a 404).",
            ),
            OpenApiParameter(
                "status",
                {"type": "string", "enum": Interrupt.Status.values},
                description="Only the interrupts of this status (default `pending`).",
            ),
            *page_parameters(INTERRUPT_CURSOR),
        ],
        responses={
            200: InterruptPageSerializer,
            **error_responses(400, 401, 404, e400="A status, limit or cursor this API cannot read"),
        },
    )
    def get(self, request: Request) -> Response:
        query = parse_page_query(request.query_params)
        thread_id = request.query_params.get("threadId")
        page = interrupts_page_for_user(
            user=request_user(request),
            thread_id=thread_id_or_404(thread_id) if thread_id is not None else None,
            status=_interrupt_status(request.query_params.get("status")),
            after=interrupt_position(query.cursor) if query.cursor else None,
            limit=query.limit,
        )
        last = page.items[-1] if page.has_more else None
        next_cursor = (
            interrupt_cursor(InterruptPosition(last.created_at, last.id)) if last else None
        )
        interrupts = [interrupt_listed(interrupt) for interrupt in page.items]
        return Response(
            InterruptPageSerializer({"interrupts": interrupts, "next": next_cursor}).data
        )


class InterruptDetailApi(APIView):
    """``GET /api/v1/agent/interrupts/{interruptId}``: one of the caller's interrupts;
    ``POST`` answers an approval from any client (a person in an inbox, another system)."""

    parser_classes = [JsonBodyParser]

    @extend_schema(
        operation_id="interrupts_retrieve",
        summary="An interrupt",
        tags=["interrupts"],
        responses={200: InterruptDetailSerializer, **error_responses(401, 404)},
    )
    def get(self, request: Request, interrupt_id: str) -> Response:
        interrupt = interrupt_get_for_user(user=request_user(request), interrupt_id=interrupt_id)
        return Response(InterruptDetailSerializer(interrupt_detail(interrupt)).data)

    @extend_schema(
        operation_id="interrupts_answer",
        summary="Answer an approval",
        description="By the rules of an AG-UI resume: `approved`, optionally the call's "
        "`arguments` edited (valid for the tool's schema) and a `reason`. Once every open "
        "interrupt of its run is answered, the run that goes on with the reply it held is "
        "queued (`continuedBy`), in the held run's chain: each protocol's client sees it.",
        tags=["interrupts"],
        request=InterruptAnswerSerializer,
        responses={
            200: InterruptDetailSerializer,
            **error_responses(
                400,
                401,
                404,
                409,
                410,
                422,
                e409="It is answered already, or it waits on a client tool's result",
                e410="It has expired",
                e422="An answer its responseSchema refuses",
            ),
        },
    )
    def post(self, request: Request, interrupt_id: str) -> Response:
        user = request_user(request)
        # The body is checked against the interrupt's own responseSchema (422 naming the
        # place), which the serializer above only documents.
        interrupt, _run = interrupt_answer(
            user=user, interrupt_id=interrupt_id, payload=request.data
        )
        interrupt = interrupt_get_for_user(user=user, interrupt_id=interrupt.id)
        return Response(InterruptDetailSerializer(interrupt_detail(interrupt)).data)


def _interrupt_status(value: str | None) -> Interrupt.Status:
    if value is None:
        return Interrupt.Status.PENDING
    if value not in Interrupt.Status.values:
        raise PageQueryInvalid(f"status must be one of {_STATUSES}")
    return Interrupt.Status(value)
