from django.urls import path

from attachments.views import AttachmentSignedUrlApi, AttachmentUploadApi

# Mounted at api/v1/agent/ by config/urls.py.
urlpatterns = [
    path("attachments", AttachmentUploadApi.as_view(), name="attachment-upload"),
    path("attachments/signed-url", AttachmentSignedUrlApi.as_view(), name="attachment-signed-url"),
]
