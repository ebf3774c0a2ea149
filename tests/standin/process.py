"""Run the stand-in as a child process from tests and benchmarks.

    with StandinProcess(vault_dir, plugin_version="3.2.0") as lra:
        with lra.client() as http:          # httpx.Client, authenticated, TLS-verified
            http.get("/vault/")
        lra.set_faults(latency_ms=200)
        lra.set_active("Projects/Note.md")  # GET /active/ now serves it
        lra.stats()["total"]

Also an async context manager (``async with StandinProcess(...) as lra``), which starts
and stops the child in a worker thread. The child's stderr is inherited; its stdout is
read for the ready line and then drained by a daemon thread so the pipe never fills.
"""

from __future__ import annotations

import json
import queue
import ssl
import subprocess
import sys
import threading
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import anyio.to_thread
import httpx

REPO_ROOT = Path(__file__).resolve().parents[2]


class StandinError(RuntimeError):
    """The child did not start, or a control call failed."""


class StandinProcess:
    def __init__(
        self,
        vault: str | Path,
        *,
        plugin_version: str = "5.1.0",
        api_key: str | None = None,
        port: int = 0,
        binding_host: str | None = None,
        subject_alt_names: tuple[str, ...] = (),
        http: bool = False,
        cert_dir: str | Path | None = None,
        smart: str = "upstream",
        query_vectors: str | Path | None = None,
        latency_ms: float | None = None,
        fail_every: int | None = None,
        hang_pattern: str | None = None,
        drop_every: int | None = None,
        link_index_pending: bool = False,
        startup_timeout: float = 20.0,
    ) -> None:
        args = [
            "--vault",
            str(vault),
            "--plugin-version",
            plugin_version,
            "--port",
            str(port),
            "--smart",
            smart,
        ]
        options: dict[str, object | None] = {
            "--api-key": api_key,
            "--cert-dir": cert_dir,
            "--query-vectors": query_vectors,
            "--latency-ms": latency_ms,
            "--fail-every": fail_every,
            "--hang-pattern": hang_pattern,
            "--drop-every": drop_every,
            "--binding-host": binding_host,
            "--subject-alt-names": ",".join(subject_alt_names) or None,
        }
        for flag, value in options.items():
            if value is not None:
                args += [flag, str(value)]
        if http:
            args.append("--http")
        if link_index_pending:
            args.append("--link-index-pending")
        self.args = args
        self.startup_timeout = startup_timeout
        self._proc: subprocess.Popen[str] | None = None
        self._drain: threading.Thread | None = None
        self._ready: dict[str, Any] = {}
        #: The child's exit status once :meth:`stop` has run (0 after a clean SIGTERM).
        self.returncode: int | None = None

    # --- lifecycle ------------------------------------------------------------------

    def start(self) -> StandinProcess:
        if self._proc is not None:
            raise StandinError("already started")
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.standin", *self.args],
            cwd=REPO_ROOT,
            stdout=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        self._proc = proc
        lines: queue.Queue[str | None] = queue.Queue()
        assert proc.stdout is not None
        self._drain = threading.Thread(target=_drain, args=(proc.stdout, lines), daemon=True)
        self._drain.start()
        try:
            line = lines.get(timeout=self.startup_timeout)
        except queue.Empty:
            self.stop()
            raise StandinError(f"no ready line within {self.startup_timeout}s") from None
        if line is None:
            code = proc.wait()
            self.stop()
            raise StandinError(f"stand-in exited with code {code} before it was ready")
        self._ready = json.loads(line)
        return self

    def stop(self) -> None:
        """Terminate the child (kill it after 5 s) and release its pipe."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        terminate(proc, grace_seconds=5)
        self.returncode = proc.returncode
        if self._drain is not None:
            self._drain.join(timeout=5)
        if proc.stdout is not None:
            proc.stdout.close()

    def __enter__(self) -> StandinProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    async def __aenter__(self) -> StandinProcess:
        return await anyio.to_thread.run_sync(self.start)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await anyio.to_thread.run_sync(self.stop)

    # --- the ready line -----------------------------------------------------------------

    @property
    def url(self) -> str:
        return str(self._ready["url"])

    @property
    def port(self) -> int:
        return int(self._ready["port"])

    @property
    def cert(self) -> str:
        return str(self._ready["cert"])

    @property
    def api_key(self) -> str:
        return str(self._ready["api_key"])

    @property
    def plugin_version(self) -> str:
        return str(self._ready["plugin_version"])

    # --- clients and control --------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        """A context trusting only this run's certificate (hostname 127.0.0.1). On another
        binding host the name is not checked: the certificate may not name it, and this
        certificate alone is trusted anyway."""
        context = ssl.create_default_context(cafile=self.cert)
        context.check_hostname = self.url.startswith("https://127.0.0.1:")
        return context

    @property
    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"}

    def client(self, *, authenticated: bool = True, **kwargs: Any) -> httpx.Client:
        """An ``httpx.Client`` on :attr:`url`, verifying the certificate."""
        headers = {**(self.auth_headers if authenticated else {}), **kwargs.pop("headers", {})}
        return httpx.Client(base_url=self.url, verify=self.ssl_context(), headers=headers, **kwargs)

    def async_client(self, *, authenticated: bool = True, **kwargs: Any) -> httpx.AsyncClient:
        headers = {**(self.auth_headers if authenticated else {}), **kwargs.pop("headers", {})}
        return httpx.AsyncClient(
            base_url=self.url, verify=self.ssl_context(), headers=headers, **kwargs
        )

    def _control(
        self, method: str, route: str, body: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        with self.client(timeout=10) as http:
            response = http.request(method, f"/__standin__/{route}", json=body)
        if response.status_code != 200:
            raise StandinError(f"{method} {route}: {response.status_code} {response.text}")
        result: dict[str, Any] = response.json()
        return result

    def set_faults(self, **faults: Any) -> dict[str, Any]:
        """Change faults at run time: ``latency_ms``, ``fail_every``, ``hang_pattern``,
        ``drop_every``, ``write_yield_ms`` (the fixed pause inside a PUT, POST or PATCH,
        where the plugin awaits between reading and writing; default a random 0-3 ms), and (6.x)
        ``link_index_pending``; ``None`` clears one, an omitted
        one is left as it is. Resets the request counter that ``fail_every``/``drop_every``
        count. Returns all faults."""
        return self._control("POST", "faults", faults)

    def clear_faults(self) -> dict[str, Any]:
        return self.set_faults(
            latency_ms=None,
            fail_every=None,
            hang_pattern=None,
            drop_every=None,
            link_index_pending=None,
            write_yield_ms=None,
        )

    def set_active(self, path: str | None) -> dict[str, Any]:
        """Open ``path`` (a vault path) in Obsidian's active pane, or close it with None:
        what ``GET /active/`` serves. Returns ``{"path": path}``."""
        return self._control("POST", "active", {"path": path})

    def active(self) -> str | None:
        """The vault path ``GET /active/`` serves, or None."""
        path: str | None = self._control("GET", "active")["path"]
        return path

    def stats(self) -> dict[str, Any]:
        """``{"total", "by_route", "by_path", "injected"}``; keys are ``"METHOD path"``."""
        return self._control("GET", "stats")

    def reset_stats(self) -> dict[str, Any]:
        return self._control("DELETE", "stats")


def terminate(proc: subprocess.Popen[Any], *, grace_seconds: float) -> None:
    """SIGTERM, then SIGKILL if the child is still there after the grace period."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=grace_seconds)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def _drain(stream: IO[str], lines: queue.Queue[str | None]) -> None:
    for line in stream:
        lines.put(line)
    lines.put(None)
