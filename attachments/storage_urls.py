from django.urls import path

from attachments.views import SignedObjectApi

# Mounted at storage/v1/object/sign/ by config/urls.py: the Supabase signed URL shape
# (docs/spec/chat-messages-and-attachments.md, Signed URL Format), served by this service.
urlpatterns = [
    path("<str:bucket>/<path:path>", SignedObjectApi.as_view(), name="attachment-signed-object"),
]
