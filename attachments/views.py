"""The attachment API (docs/spec/chat-messages-and-attachments.md, User Message Attachments, Flow
steps 1 and 6) and the endpoint that serves this service's signed URLs."""

from typing import Any, cast

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.core.files.uploadhandler import FileUploadHandler
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from drf_spectacular.utils import (
    OpenApiParameter,
    OpenApiRequest,
    OpenApiResponse,
    extend_schema,
    inline_serializer,
)
from rest_framework import serializers, status
from rest_framework.negotiation import BaseContentNegotiation
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from agent_runs.api.openapi import error_responses
from attachments import selectors, services
from attachments.errors import AttachmentFileMissing, AttachmentTooLarge, ObjectPathInvalid
from attachments.images import MAX_PIXELS
from attachments.signing import (
    BUCKET_PATTERN,
    MAX_PATH_LENGTH,
    MAX_TOKEN_LENGTH,
    PATH_PATTERN,
    TOKEN_PATTERN,
    signed_url_create,
)

# What multipart framing (boundaries, part headers, a short form field) adds around a file.
_MULTIPART_OVERHEAD_BYTES = 64 * 1024
# The image types an upload may be (attachments/images.py), served back as stored.
_IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_BINARY = {"type": "string", "format": "binary"}


class AttachmentUploadApi(APIView):
    """``POST /api/v1/agent/attachments`` (multipart ``file``): store an image, answer
    ``{bucket, path, mime_type, url}`` with ``url`` a signed URL."""

    parser_classes = [MultiPartParser]

    @extend_schema(
        operation_id="attachments_create",
        summary="Upload an image",
        tags=["attachments"],
        request={
            "multipart/form-data": OpenApiRequest(
                {
                    "type": "object",
                    "properties": {
                        "file": {
                            **_BINARY,
                            "description": "A PNG, JPEG, GIF or WebP image that decodes "
                            "(judged by its bytes, whatever its part's type), of at most "
                            f"ATTACHMENT_MAX_BYTES and {MAX_PIXELS:,} pixels.",
                        }
                    },
                    "required": ["file"],
                },
                encoding={"file": {"contentType": ", ".join(_IMAGE_TYPES)}},
            )
        },
        responses={
            201: inline_serializer(
                "AttachmentUploaded",
                {
                    "bucket": serializers.CharField(),
                    "path": serializers.CharField(),
                    "mime_type": serializers.ChoiceField(choices=_IMAGE_TYPES),
                    "url": serializers.URLField(help_text="A signed URL of the image."),
                },
            ),
            **error_responses(
                400,
                401,
                403,
                413,
                415,
                e400="No file field, or more than one file",
                e415="Not an image that decodes",
            ),
        },
    )
    def post(self, request: Request) -> Response:
        return self._upload(request)

    def initialize_request(self, request: HttpRequest, *args: Any, **kwargs: Any) -> Request:
        # Before anything can read the body (session authentication's CSRF check reads POST).
        request.upload_handlers.insert(0, _SizeLimitUploadHandler(settings.ATTACHMENT_MAX_BYTES))
        return super().initialize_request(request, *args, **kwargs)

    def _upload(self, request: Request) -> Response:
        files = request.FILES.getlist("file")
        if len(files) != 1:
            raise AttachmentFileMissing("send exactly one image in the multipart field 'file'")
        attachment = services.attachment_upload(
            user=cast(AbstractBaseUser, request.user), file=files[0]
        )
        body = {
            "bucket": attachment.bucket,
            "path": attachment.path,
            "mime_type": attachment.mime_type,
            "url": signed_url_create(bucket=attachment.bucket, path=attachment.path),
        }
        return Response(body, status=status.HTTP_201_CREATED)


class AttachmentSignedUrlApi(APIView):
    """``GET /api/v1/agent/attachments/signed-url?bucket=…&path=…``: a fresh signed URL
    ``{bucket, path, url}`` for an object the caller owns; 404 otherwise."""

    @extend_schema(
        operation_id="attachments_signed_url_retrieve",
        summary="A fresh signed URL of an image of the caller's",
        tags=["attachments"],
        parameters=[
            OpenApiParameter(
                "bucket", {"type": "string", "pattern": BUCKET_PATTERN}, required=True
            ),
            OpenApiParameter(
                "path",
                {"type": "string", "pattern": PATH_PATTERN, "maxLength": MAX_PATH_LENGTH},
                required=True,
            ),
        ],
        responses={
            200: inline_serializer(
                "AttachmentSignedUrl",
                {
                    "bucket": serializers.CharField(),
                    "path": serializers.CharField(),
                    "url": serializers.URLField(),
                },
            ),
            **error_responses(400, 401, 404, e400="A missing or unsafe bucket or path"),
        },
    )
    def get(self, request: Request) -> Response:
        bucket = request.query_params.get("bucket", "")
        path = request.query_params.get("path", "")
        if not bucket or not path:
            raise ObjectPathInvalid("query parameters bucket and path are required")
        attachment = selectors.attachment_get_for_user(
            user=cast(AbstractBaseUser, request.user), bucket=bucket, path=path
        )
        url = signed_url_create(bucket=attachment.bucket, path=attachment.path)
        return Response({"bucket": attachment.bucket, "path": attachment.path, "url": url})


class _AnyAccept(BaseContentNegotiation):
    """The bytes go out whatever ``Accept`` says (an ``<img>`` asks for ``image/*``); errors
    go out as JSON."""

    def select_parser(self, request: Request, parsers: Any) -> Any:
        return parsers[0] if parsers else None

    def select_renderer(
        self, request: Request, renderers: Any, format_suffix: str | None = None
    ) -> tuple[Any, str]:
        return renderers[0], renderers[0].media_type


class SignedObjectApi(APIView):
    """``GET /storage/v1/object/sign/{bucket}/{path}?token=…``: the bytes a signed URL grants.
    The token is the credential, so no other authentication is read (a browser ``<img>`` sends
    none)."""

    authentication_classes = []
    permission_classes = [AllowAny]
    content_negotiation_class = _AnyAccept

    @extend_schema(
        operation_id="storage_signed_object_retrieve",
        summary="The image a signed URL grants",
        description="The token is the credential: no other authentication is read.",
        tags=["attachments"],
        auth=[],
        parameters=[
            OpenApiParameter(
                "bucket",
                {"type": "string", "pattern": BUCKET_PATTERN},
                location=OpenApiParameter.PATH,
            ),
            OpenApiParameter(
                "path",
                {"type": "string", "pattern": PATH_PATTERN, "maxLength": MAX_PATH_LENGTH},
                location=OpenApiParameter.PATH,
            ),
            OpenApiParameter(
                "token",
                {"type": "string", "pattern": TOKEN_PATTERN, "maxLength": MAX_TOKEN_LENGTH},
                required=True,
            ),
        ],
        responses={
            **{
                (200, image_type): OpenApiResponse(_BINARY, description="The stored image.")
                for image_type in _IMAGE_TYPES
            },
            **{
                (status_code, "application/json"): error
                for status_code, error in error_responses(
                    400,
                    403,
                    404,
                    e400="A missing or malformed token, or an unsafe bucket or path",
                    e403="A token tampered with, for another object, or expired",
                    e404="The object is gone",
                ).items()
            },
        },
    )
    def get(self, request: Request, bucket: str, path: str) -> HttpResponse:
        signed = selectors.signed_content_get(
            bucket=bucket, path=path, token=request.query_params.get("token", "")
        )
        response = HttpResponse(signed.content, content_type=signed.attachment.mime_type)
        filename = signed.attachment.path.rsplit("/", 1)[-1]
        response["Content-Disposition"] = f'inline; filename="{filename}"'
        response["X-Content-Type-Options"] = "nosniff"
        # Even if a browser were talked into rendering the bytes as a document: no scripts.
        response["Content-Security-Policy"] = "default-src 'none'; sandbox"
        remaining = int((signed.expires_at - timezone.now()).total_seconds())
        response["Cache-Control"] = f"private, max-age={max(remaining, 0)}"
        return response


class _SizeLimitUploadHandler(FileUploadHandler):
    """Stops parsing a multipart upload as soon as its files pass the limit (or its declared
    length does), so an oversized file is never copied into an upload file. (Under ASGI the raw
    body has already been read by then: a proxy in front limits that.)"""

    def __init__(self, max_bytes: int) -> None:
        super().__init__()
        self.max_bytes = max_bytes
        self.received = 0

    def handle_raw_input(
        self, input_data: Any, META: Any, content_length: int, boundary: Any, encoding: Any = None
    ) -> None:
        if content_length > self.max_bytes + _MULTIPART_OVERHEAD_BYTES:
            raise AttachmentTooLarge(self.max_bytes)

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes:
        self.received += len(raw_data)
        if self.received > self.max_bytes:
            raise AttachmentTooLarge(self.max_bytes)
        return raw_data

    def file_complete(self, file_size: int) -> None:
        return None
