from django.urls import path

from billing.views import UsageApi

# Mounted at api/v1/agent/ by config/urls.py.
urlpatterns = [path("usage", UsageApi.as_view(), name="usage")]
