from django.urls import path

from history.views import HistorySnapshotApi

# Mounted at api/v1/agent/history by config/urls.py.
urlpatterns = [path("", HistorySnapshotApi.as_view(), name="history-snapshot")]
