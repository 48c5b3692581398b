"""The HTTP client of the model providers: an aiohttp session per provider and event loop,
whose connections acknowledge what they receive at once (Linux's ``TCP_QUICKACK``).

aiohttp parses a response in C (its ``llhttp`` parser) and hands a streamed body on as it
arrives: a chunk of a streamed answer costs a few microseconds to read, where httpx went
through httpcore's and h11's ten Python layers a chunk (about a sixth of a worker's CPU with
tokens 20 ms apart; docs/benchmarks.md). Its pool finds a kept-alive connection by key, so one
pool serves every call of a provider.

A provider that writes a response's headers and its body in two writes, without
``TCP_NODELAY`` (some self-hosted model servers, and the loopback providers of the
benchmarks), otherwise makes every call on a kept-alive connection wait for the receiver's
delayed acknowledgement of the headers before its body may leave: 40 ms a call on Linux, the
whole of a fast model's answer. Acknowledging at once costs an ACK packet per read; it changes
nothing else, and where the option does not exist (not Linux) nothing is done.
"""

import asyncio
import socket
import ssl
from functools import partial
from typing import Any

import aiohttp
from aiohttp.client_proto import ResponseHandler

_QUICKACK = getattr(socket, "TCP_QUICKACK", None)


class _QuickAckHandler(ResponseHandler):
    """A connection's protocol that re-arms quick acknowledgements as it is made and after
    each read (the kernel leaves quick-ack mode again on its own)."""

    _socket: Any = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        self._socket = transport.get_extra_info("socket")
        self._quickack()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._quickack()

    def _quickack(self) -> None:
        if self._socket is not None and _QUICKACK is not None:
            try:
                self._socket.setsockopt(socket.IPPROTO_TCP, _QUICKACK, 1)
            except OSError:  # not a TCP socket after all: nothing to tune
                self._socket = None


def provider_session(*, limit: int, tls: ssl.SSLContext | None = None) -> aiohttp.ClientSession:
    """An aiohttp session (on the running loop) whose connections acknowledge at once, at
    most ``limit`` of them; ``tls``: the context to verify servers with (aiohttp's default
    when none). No timeout of its own: each request carries its own."""
    connector = aiohttp.TCPConnector(limit=limit, ssl=True if tls is None else tls)
    # aiohttp takes no protocol of its own: its connector makes each connection's.
    factory: Any = partial(_QuickAckHandler, loop=asyncio.get_running_loop())
    connector._factory = factory
    return aiohttp.ClientSession(
        connector=connector,
        timeout=aiohttp.ClientTimeout(total=None),
    )
