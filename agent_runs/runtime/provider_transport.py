"""The HTTP transport of the model providers' clients: httpx's own, whose connections
acknowledge what they receive at once (Linux's ``TCP_QUICKACK``).

A provider that writes a response's headers and its body in two writes, without
``TCP_NODELAY`` (some self-hosted model servers, and the loopback providers of the
benchmarks), otherwise makes every call on a kept-alive connection wait for the receiver's
delayed acknowledgement of the headers before its body may leave: 40 ms a call on Linux, the
whole of a fast model's answer. Acknowledging at once costs an ACK packet per read; it changes
nothing else, and where the option does not exist (not Linux) nothing is done.
"""

import socket
import ssl
from typing import Any

import httpcore
import httpx
from httpcore._backends.auto import AutoBackend

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


class _QuickAckStream(httpcore.AsyncNetworkStream):
    """A connection that re-arms quick acknowledgements around each write and read (the
    kernel leaves quick-ack mode again on its own)."""

    def __init__(self, stream: httpcore.AsyncNetworkStream) -> None:
        self._stream = stream
        self._socket = stream.get_extra_info("socket")

    def _quickack(self) -> None:
        if self._socket is not None and _QUICKACK is not None:
            try:
                self._socket.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:  # not a TCP socket after all: nothing to tune
                self._socket = None

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        data = await self._stream.read(max_bytes, timeout)
        self._quickack()
        return data

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._stream.write(buffer, timeout)
        self._quickack()

    async def aclose(self) -> None:
        await self._stream.aclose()

    async def start_tls(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        stream = _QuickAckStream(await self._stream.start_tls(*args, **kwargs))
        return stream

    def get_extra_info(self, info: str) -> Any:
        return self._stream.get_extra_info(info)


class _QuickAckBackend(AutoBackend):
    async def connect_tcp(self, *args: Any, **kwargs: Any) -> httpcore.AsyncNetworkStream:
        return _QuickAckStream(await super().connect_tcp(*args, **kwargs))


def provider_transport(
    *, limits: httpx.Limits, tls: ssl.SSLContext | None = None
) -> httpx.AsyncHTTPTransport:
    """httpx's transport with quick acknowledgements on its connections (``tls``: the TLS
    context to verify servers with, httpx's default when none)."""
    transport = httpx.AsyncHTTPTransport(limits=limits, verify=True if tls is None else tls)
    # httpx takes no network backend of its own: its pool (httpcore's) does.
    transport._pool._network_backend = _QuickAckBackend()
    return transport
