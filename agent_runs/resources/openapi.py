"""What the schema says of the service's own REST resources beyond their ``extend_schema``:
the query parameters their views share."""

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter

from agent_runs.resources.inbound import MAX_LIMIT


def page_parameters(cursor_pattern: str) -> list[OpenApiParameter]:
    """``limit`` and ``cursor``: the query of a keyset page (inbound.py)."""
    return [
        OpenApiParameter(
            "limit",
            {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT},
            description=f"Items per page, 1 to {MAX_LIMIT} (default 20).",
        ),
        OpenApiParameter(
            "cursor",
            {"type": "string", "pattern": cursor_pattern},
            description="The `next` of the page before.",
        ),
    ]


# A run's ``threadId`` query, for a runId the caller used in several threads.
THREAD_ID_QUERY = OpenApiParameter(
    "threadId",
    OpenApiTypes.UUID,
    description="The thread, when the caller used the runId in several.",
)
