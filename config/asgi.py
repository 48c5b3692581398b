"""ASGI entry point for daphne: HTTP now; WebSocket routes join the router as they are built."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django_asgi_app = get_asgi_application()

from channels.routing import ProtocolTypeRouter  # noqa: E402 - needs the Django app set up first

application = ProtocolTypeRouter({"http": django_asgi_app})
