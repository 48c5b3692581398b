from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/agent/", include("agent_runs.urls")),
    path("api/v1/agent/history", include("history.urls")),
    path("api/v1/agent/", include("attachments.urls")),
    path("storage/v1/object/sign/", include("attachments.storage_urls")),
]
