"""Every route of the service, mounted in this one place: each app's and protocol's URL
module under its prefix, and the routes Channels serves (``asgi_http_urlpatterns``,
``websocket_urlpatterns``, read by config/asgi.py)."""

from django.contrib import admin
from django.urls import include, path, re_path
from django.views.decorators.cache import cache_page
from django.views.generic import RedirectView
from drf_spectacular.views import SpectacularAPIView, SpectacularRedocView, SpectacularSwaggerView

# Registers the AG-UI views' schema descriptions (drf-spectacular extensions).
import agent_runs.protocols.agui.openapi  # noqa: F401
from agent_runs.protocols.agent_protocol import routing as agent_protocol_routing
from agent_runs.protocols.agent_protocol import urls as agent_protocol_urls
from agent_runs.protocols.agui import routing as agui_routing
from config.exceptions import unrouted

# The admin's "View site" link.
admin.site.site_url = "/console/"

urlpatterns = [
    # The address the quick start prints first: the console, for people.
    path("", RedirectView.as_view(pattern_name="console:index"), name="home"),
    # Probes and metrics (docs/operations.md).
    path("", include("ops.urls")),
    path("admin/", admin.site.urls),
    # The AgentScope Agent API, before the AG-UI routes it shares a prefix with.
    path("api/v1/agent/", include("agent_runs.protocols.agent_api.urls")),
    # AG-UI: runs, the conversation endpoint, the capabilities, cancel, stream tokens.
    path("api/v1/agent/", include("agent_runs.protocols.agui.urls")),
    # The service's own REST resources: threads and runs, interrupts, API keys, automations.
    path("api/v1/agent/", include("agent_runs.resources.urls")),
    path("api/v1/agent/history", include("history.urls")),
    path("api/v1/agent/", include("attachments.urls")),
    path("api/v1/agent/", include("billing.urls")),
    path("storage/v1/object/sign/", include("attachments.storage_urls")),
    # The Agent Protocol: the spec's set and the official v1 set.
    path("api/", include(agent_protocol_urls.spec_urlpatterns)),
    path("ap/v1/agent/", include(agent_protocol_urls.v1_urlpatterns)),
    # The OpenAI Responses API: an OpenAI SDK's base_url is http://<host>/openai/v1.
    path("openai/v1/", include("agent_runs.protocols.openai_responses.urls")),
    # A2A: the agent card at /.well-known/agent-card.json and JSON-RPC at /a2a.
    path("", include("agent_runs.protocols.a2a.urls")),
    # The web console, a page for people on the public HTTP API (docs/console.md).
    path("console/", include("console.urls")),
    # The OpenAPI schema and its pages (agent_runs/api/openapi.py), public; the pages' scripts are
    # this service's static files. The schema is the same until the code changes, and takes
    # a tenth of a second to generate: each process keeps it for an hour.
    path("api/schema/", cache_page(3600)(SpectacularAPIView.as_view()), name="schema"),
    path("api/docs/", SpectacularSwaggerView.as_view(url_name="schema"), name="schema-docs"),
    path("api/redoc/", SpectacularRedocView.as_view(url_name="schema"), name="schema-redoc"),
    # Last: any other path under an API prefix is its protocol's JSON 404, in debug mode too.
    # Not an API view, so not in the schema.
    re_path(r"^(?:api|ap|openai|storage|a2a)/", unrouted, name="unrouted"),
]

handler404 = "config.exceptions.not_found"

# The routes Channels serves itself (config/asgi.py), mounted here with the rest: the
# streams served by consumers rather than views, before Django, and the WebSockets.
asgi_http_urlpatterns = [*agui_routing.http_urlpatterns]
websocket_urlpatterns = [*agent_protocol_routing.websocket_urlpatterns]
