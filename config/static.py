"""Static files (the admin's) served in front of Django at the ASGI level.

Not as middleware: WhiteNoise's middleware is synchronous, and a synchronous middleware
holds a thread for as long as a response streams, so every open SSE connection would pin a
thread. Here only requests under STATIC_URL ever reach synchronous code.
"""

import asyncio
import contextvars
from collections.abc import Callable, Iterable
from typing import Any

from asgiref.wsgi import WsgiToAsgi
from django.conf import settings
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler
from whitenoise.base import WhiteNoise

ASGIApp = Callable[..., Any]


def with_static_files(app: ASGIApp) -> ASGIApp:
    if settings.DEBUG:
        # Development: straight from the apps' static folders, no collectstatic needed.
        return ASGIStaticFilesHandler(app)  # type: ignore[arg-type]  # any ASGI app works
    files = WsgiToAsgi(
        WhiteNoise(_not_found, root=settings.STATIC_ROOT, prefix=settings.STATIC_URL)
    )
    prefix = "/" + settings.STATIC_URL.lstrip("/")

    async def router(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"].startswith(prefix):
            # In a fresh context: a request that follows another on a kept-alive connection
            # can inherit asgiref's marker of the earlier response's sync thread (set where
            # that thread sent its body), long gone, and WhiteNoise's thread-sensitive call
            # would be submitted to it ("CurrentThreadExecutor already quit or is broken").
            await asyncio.create_task(files(scope, receive, send), context=contextvars.Context())
        else:
            await app(scope, receive, send)

    return router


def _not_found(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
    start_response("404 Not Found", [("Content-Type", "text/plain")])
    return [b"Not Found"]
