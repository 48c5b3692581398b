"""ASGI entry point for daphne: HTTP now; WebSocket routes join the router as they are built."""

import os

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup(set_prefix=False)

from channels.routing import ProtocolTypeRouter  # noqa: E402 - needs the Django app set up first

from agent_runs.sse_app import with_event_stream  # noqa: E402
from config.asgi_handler import SyncChainASGIHandler  # noqa: E402
from config.static import with_static_files  # noqa: E402

django_asgi_app = SyncChainASGIHandler()

application = ProtocolTypeRouter({"http": with_static_files(with_event_stream(django_asgi_app))})
