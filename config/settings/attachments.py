"""Attachments (attachments/) and the sizes and waits of requests: signed URLs, storage,
upload and body limits."""

from pathlib import Path

from django.core.exceptions import ImproperlyConfigured

from config.env import env_int, env_list, env_str
from config.settings.base import LOCAL_DIR

# Signed URLs are {PUBLIC_BASE_URL}/storage/v1/object/sign/{bucket}/{path}?token=… (Supabase's
# shape) and this service serves them: set it to the address clients reach this service at.
PUBLIC_BASE_URL = env_str("PUBLIC_BASE_URL", "http://127.0.0.1:8000").rstrip("/")
if not PUBLIC_BASE_URL.startswith(("http://", "https://")):
    raise ImproperlyConfigured(f"PUBLIC_BASE_URL must be an http(s) URL, got {PUBLIC_BASE_URL!r}")
ATTACHMENT_BUCKET = env_str("ATTACHMENT_BUCKET", "agent-inputs")
ATTACHMENT_MAX_BYTES = env_int("ATTACHMENT_MAX_BYTES", 5 * 1024 * 1024, minimum=1)
# How long an official Agent Protocol step request waits for its step to finish before it
# answers the step as it stands (running).
AGENT_PROTOCOL_STEP_WAIT_SECONDS = env_int("AGENT_PROTOCOL_STEP_WAIT_SECONDS", 120, minimum=1)
# How long a request answered with a run's final object (a non-streamed Responses or Agent API
# request) waits for the run, on the event loop, before answering it as it stands. Under the
# OpenAI SDK's own timeout (600 s).
AGENT_RESPONSE_WAIT_SECONDS = env_int("AGENT_RESPONSE_WAIT_SECONDS", 540, minimum=1)
# The largest artifact a client may upload to a task (the Agent Protocol; the spec's 50 MB).
ARTIFACT_MAX_BYTES = env_int("ARTIFACT_MAX_BYTES", 50 * 1024 * 1024, minimum=1)
# The largest request body daphne reads (config/daphne_requests.py): a larger one is refused
# before it is read. By default the largest upload, with a megabyte for its multipart framing;
# each endpoint refuses bodies over its own, smaller, limit itself.
REQUEST_BODY_MAX_BYTES = env_int(
    "REQUEST_BODY_MAX_BYTES",
    max(ARTIFACT_MAX_BYTES, ATTACHMENT_MAX_BYTES) + 1024 * 1024,
    minimum=1,
)
ATTACHMENT_SIGNED_URL_TTL_SECONDS = env_int("ATTACHMENT_SIGNED_URL_TTL_SECONDS", 3600, minimum=1)
# Empty: a key derived from SECRET_KEY (which has no production default either).
ATTACHMENT_SIGNING_SECRET = env_str("ATTACHMENT_SIGNING_SECRET", "")
# "filesystem" (under ATTACHMENT_STORAGE_ROOT) or "s3": S3 or Supabase Storage's S3 endpoint
# through django-storages (pip install "django-storages[s3]"); credentials may also come from
# boto3's own AWS_* variables. Buckets are top-level folders (key prefixes on S3).
ATTACHMENT_STORAGE_BACKEND = env_str("ATTACHMENT_STORAGE_BACKEND", "filesystem")
ATTACHMENT_STORAGE_ROOT = Path(env_str("ATTACHMENT_STORAGE_ROOT") or LOCAL_DIR / "attachments")
_attachment_storage: dict[str, object]
if ATTACHMENT_STORAGE_BACKEND == "filesystem":
    _attachment_storage = {
        "BACKEND": "django.core.files.storage.FileSystemStorage",
        "OPTIONS": {"location": ATTACHMENT_STORAGE_ROOT},
    }
elif ATTACHMENT_STORAGE_BACKEND == "s3":
    _attachment_s3_bucket = env_str("ATTACHMENT_S3_BUCKET_NAME", "")
    if not _attachment_s3_bucket:
        raise ImproperlyConfigured("ATTACHMENT_S3_BUCKET_NAME must be set for the s3 backend")
    _attachment_storage = {
        "BACKEND": "storages.backends.s3.S3Storage",
        "OPTIONS": {
            "bucket_name": _attachment_s3_bucket,
            "endpoint_url": env_str("ATTACHMENT_S3_ENDPOINT_URL", "") or None,
            "region_name": env_str("ATTACHMENT_S3_REGION", "") or None,
            "access_key": env_str("ATTACHMENT_S3_ACCESS_KEY_ID", "") or None,
            "secret_key": env_str("ATTACHMENT_S3_SECRET_ACCESS_KEY", "") or None,
            "addressing_style": "path",
            "default_acl": None,
            # Never overwrite: a failed upload deletes what it wrote, never someone's object.
            "file_overwrite": False,
        },
    }
else:
    raise ImproperlyConfigured(
        f"ATTACHMENT_STORAGE_BACKEND must be filesystem or s3, got {ATTACHMENT_STORAGE_BACKEND!r}"
    )
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "django.contrib.staticfiles.storage.StaticFilesStorage"},
    "attachments": _attachment_storage,
}
# Images a model may show in a compiled ui_schema (agent_runs/ui_schema.py): URL prefixes,
# comma-separated; by default only this service's signed URLs.
UI_SCHEMA_IMAGE_URL_PREFIXES = env_list(
    "UI_SCHEMA_IMAGE_URL_PREFIXES", [f"{PUBLIC_BASE_URL}/storage/v1/object/sign/"]
)
