"""Connections to Obsidian that are cancelled during their TLS handshake close their socket.

httpcore 1.0.9 closes a new TCP stream when its TLS handshake fails with an error
(`httpcore/_backends/anyio.py`, `AnyIOStream.start_tls`: `except Exception`), but a
cancellation is not an `Exception`: a request cancelled mid-handshake leaves its socket
open until the garbage collector finds it. Requests are cancelled here in ordinary work: a
call's retry budget runs out, the first failed read of a batch cancels its siblings, the
server stops while it reads the vault in the background. On a flaky connection each one
leaked a socket (and, under the tests' `error` filter, failed whichever test was running
when the collector ran). The wrapper below closes the stream on any exit of the handshake.
"""

from __future__ import annotations

import ssl
import typing
from collections.abc import Iterable

import anyio
import httpcore
import httpx


class _HandshakeSafeStream(httpcore.AsyncNetworkStream):
    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, timeout)

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, timeout)

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            return await self._inner.start_tls(ssl_context, server_hostname, timeout)
        except BaseException:
            # Closing twice is harmless: httpcore has closed it already after an error.
            with anyio.CancelScope(shield=True):
                await self._inner.aclose()
            raise

    def get_extra_info(self, info: str) -> typing.Any:
        return self._inner.get_extra_info(info)


class _HandshakeSafeBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        return _HandshakeSafeStream(stream)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[typing.Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        stream = await self._inner.connect_unix_socket(path, timeout, socket_options)
        return _HandshakeSafeStream(stream)

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def handshake_safe_transport(verify: ssl.SSLContext | bool) -> httpx.AsyncHTTPTransport:
    """httpx's own transport with its defaults, whose new connections close their socket
    however their handshake ends. httpx offers no parameter for httpcore's network backend,
    so the pool it built gets the wrapper around its own backend."""
    transport = httpx.AsyncHTTPTransport(verify=verify)
    pool = typing.cast(httpcore.AsyncConnectionPool, transport._pool)  # pyright: ignore[reportPrivateUsage]
    pool._network_backend = _HandshakeSafeBackend(pool._network_backend)  # pyright: ignore[reportPrivateUsage]
    return transport
