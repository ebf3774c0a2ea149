"""A stranger at Obsidian's address: a real TLS listener with a certificate of its own that
logs every request it receives, headers included, and answers like a plugin would (its
certificate on the certificate route, a 6.x greeting elsewhere) so that a client that
trusts it goes on to send what it would send Obsidian.

What it logs is what a stranger would learn; the tests count the requests that carried a key.
"""

from __future__ import annotations

import json
import ssl
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

from tests.standin.certs import CERT_NAME, generate_certificate


@dataclass(frozen=True)
class Received:
    method: str
    path: str
    headers: dict[str, str]

    @property
    def carries_a_key(self) -> bool:
        return any(name.lower() == "authorization" for name in self.headers)


class _TlsServer(ThreadingHTTPServer):
    """TLS with the handshake in each connection's own thread, bounded in time. Done in the
    accept loop (a wrapped listening socket), one client that connects and never finishes
    its handshake (a check cancelled half-way) holds the loop, and `shutdown` waits for it
    for ever: in a fixture's teardown, beyond any test's timeout."""

    def __init__(self, tls: ssl.SSLContext, handler: type[BaseHTTPRequestHandler]) -> None:
        self.tls = tls
        super().__init__(("127.0.0.1", 0), handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, address = super().get_request()
        return self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), address

    def finish_request(self, request: Any, client_address: Any) -> None:
        try:
            request.settimeout(10)
            request.do_handshake()
        except OSError:
            return  # a client that refused the certificate, or went quiet
        super().finish_request(request, client_address)


@dataclass
class LoggingListener:
    """`with LoggingListener(folder) as stranger:` listens on 127.0.0.1 at `stranger.port`."""

    folder: Path
    received: list[Received] = field(default_factory=list[Received])

    def __post_init__(self) -> None:
        self.certificate = generate_certificate(self.folder)
        self.pem = self.certificate.pem.decode()
        log, pem = self.received, self.pem

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                log.append(Received(self.command, self.path, dict(self.headers.items())))
                if self.path.lstrip("/") == CERT_NAME:
                    body, kind = pem.encode(), "application/x-pem-file"
                else:
                    greeting = {
                        "status": "OK",
                        "authenticated": True,
                        "service": "Obsidian Local REST API",
                        "versions": {"obsidian": "1.8.0", "self": "6.0.0"},
                    }
                    body, kind = json.dumps(greeting).encode(), "application/json"
                self.send_response(200)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

            def log_message(self, format: str, *args: object) -> None:
                pass  # the list above is the log

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.certificate.cert_path, self.certificate.key_path)
        self._server = _TlsServer(context, Handler)
        self.port: int = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def keyed(self) -> list[Received]:
        """The requests that carried an API key."""
        return [request for request in self.received if request.carries_a_key]

    def __enter__(self) -> LoggingListener:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
