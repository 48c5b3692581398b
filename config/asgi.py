"""ASGI entry point for daphne: Channels routes the streaming endpoints to their consumers and
everything else to Django; WebSockets go to the Agent Protocol's ``/ws`` (the routes: all
mounted in config/urls.py)."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)

# These need the Django apps set up first.
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.urls import get_resolver, re_path  # noqa: E402

from agent_runs.heap import freeze_startup_heap  # noqa: E402
from agent_runs.tracing import tracing_start  # noqa: E402
from config import daphne_requests  # noqa: E402
from config.asgi_handler import SyncChainASGIHandler  # noqa: E402
from config.static import with_static_files  # noqa: E402

daphne_requests.install()
# Before the handler loads its middleware: with tracing on, each request is a span.
tracing_start(service_name="agent-run-server", django_requests=True)
django_asgi_app = SyncChainASGIHandler()

# The routes Channels serves itself, mounted with the rest (and loaded, as before, once the
# handler is made).
from config.urls import asgi_http_urlpatterns, websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": with_static_files(
            # Django's stubs expect a view in re_path(); Channels takes any ASGI app there.
            URLRouter([*asgi_http_urlpatterns, re_path(r"", django_asgi_app)])  # type: ignore[arg-type]
        ),
        "websocket": URLRouter(websocket_urlpatterns),
    }
)

# What this process serves with, imported now rather than at the first request (the URL
# configuration, and with it every protocol's views), then out of the collector's sight.
get_resolver().url_patterns  # noqa: B018
freeze_startup_heap()
