"""Streamable HTTP: the MCP server at `/mcp`, behind a bearer token and a local-Origin check.

The SDK's transport does the protocol; this module only guards the door. One process and
one lifespan serve every client, so all of them share one vault, index and memory store.
"""

import hmac
import logging
import secrets
import sys
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import anyio
import uvicorn
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from starlette.datastructures import Headers
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

from obsidian_mcp.config import MCP_HTTP_HOST, MCP_HTTP_PORT, is_loopback

logger = logging.getLogger(__name__)

MCP_PATH = "/mcp"


def is_local_origin(origin: str) -> bool:
    """A browser page on this machine; anything else is a DNS-rebinding or cross-site risk."""
    parts = urlsplit(origin)
    return parts.scheme in ("http", "https") and is_loopback(parts.hostname or "")


class RequestGuard:
    """ASGI middleware: a foreign `Origin` gets 403 and a missing or wrong token 401,
    before any MCP code runs."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self._app = app
        self._expected = f"Bearer {token}".encode()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # the lifespan passes through
            await self._app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        origin = headers.get("origin")
        if origin is not None and not is_local_origin(origin):
            refusal = JSONResponse(
                {"error": "requests from web pages on other hosts are refused (Origin)"},
                status_code=403,
            )
            await refusal(scope, receive, send)
            return
        given = headers.get("authorization", "").encode()
        if not hmac.compare_digest(given, self._expected):
            refusal = JSONResponse(
                {
                    "error": "missing or wrong bearer token: send 'Authorization: Bearer "
                    "<token>' with the token obsidian-mcp printed at start, or the value of "
                    "OBSIDIAN_MCP_HTTP_TOKEN"
                },
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
            await refusal(scope, receive, send)
            return
        await self._app(scope, receive, send)


@dataclass(frozen=True)
class HttpOptions:
    host: str = MCP_HTTP_HOST
    port: int = MCP_HTTP_PORT
    # The token clients must send; None generates one and prints it once at start.
    token: str | None = None


def guarded_app(server: MCPServer[Any], options: HttpOptions, token: str) -> ASGIApp:
    # The SDK checks the Host header itself when bound to loopback (DNS rebinding); bound
    # elsewhere, clients use the machine's own name, so only our Origin check remains.
    security = (
        None
        if is_loopback(options.host)
        else TransportSecuritySettings(enable_dns_rebinding_protection=False)
    )
    app = server.streamable_http_app(
        streamable_http_path=MCP_PATH, transport_security=security, host=options.host
    )
    return RequestGuard(app, token)


async def serve_http(server: MCPServer[Any], options: HttpOptions) -> None:
    """Serve until cancelled. The generated token goes to stderr once; a given one never."""
    token = options.token or secrets.token_urlsafe(32)
    config = uvicorn.Config(
        guarded_app(server, options, token),
        host=options.host,
        port=options.port,
        log_level="warning",
        access_log=False,
    )
    web = uvicorn.Server(config)
    async with anyio.create_task_group() as group:
        group.start_soon(web.serve)
        while not web.started:
            if web.should_exit:
                return
            await anyio.sleep(0.05)
        port = web.servers[0].sockets[0].getsockname()[1]
        host = f"[{options.host}]" if ":" in options.host else options.host
        # Printed, not logged: the address is the one thing the user needs from this line.
        print(f"obsidian-mcp: MCP over HTTP at http://{host}:{port}{MCP_PATH}", file=sys.stderr)
        if options.token is None:
            print(
                f"obsidian-mcp: bearer token for this run: {token} "
                "(set OBSIDIAN_MCP_HTTP_TOKEN to choose a lasting one)",
                file=sys.stderr,
                flush=True,
            )
