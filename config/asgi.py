"""ASGI entry point for daphne: HTTP now; WebSocket routes join the router as they are built."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402 - needs the Django app set up first

from agent_runs.sse_app import with_event_stream  # noqa: E402
from config.static import with_static_files  # noqa: E402

application = ProtocolTypeRouter({"http": with_static_files(with_event_stream(django_asgi_app))})
