"""Command line: ``python -m tests.standin --vault PATH [options]`` (run from the repo root).

Prints one JSON ready line to stdout (``url``, ``port``, ``cert``, ``api_key``,
``plugin_version``), logs to stderr, and exits cleanly on SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import json
import secrets
import signal
import ssl
import sys
import tempfile
import threading
from pathlib import Path
from types import FrameType

from .certs import DEFAULT_BINDING_HOST, load_or_generate_certificate
from .server import SMART_FORK, SMART_OFF, SMART_UPSTREAM, Config, Faults, StandinServer, State


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tests.standin",
        description="Stand-in for Obsidian's Local REST API plugin over a vault folder.",
    )
    parser.add_argument("--vault", required=True, type=Path, help="vault folder")
    parser.add_argument("--plugin-version", default="5.1.0", help="plugin version to emulate")
    parser.add_argument("--api-key", default=None, help="bearer key (default: random 64-hex)")
    parser.add_argument("--port", type=int, default=0, help="0 picks a free port")
    parser.add_argument(
        "--binding-host",
        default=DEFAULT_BINDING_HOST,
        help="the address to listen on (the plugin's 'Binding host' setting); a certificate "
        "made now names it too, unless it is 0.0.0.0",
    )
    parser.add_argument(
        "--subject-alt-names",
        default="",
        help="extra host names for a certificate made now, comma-separated (the plugin's "
        "'Certificate hostnames' setting)",
    )
    parser.add_argument("--http", action="store_true", help="plain HTTP instead of HTTPS")
    parser.add_argument(
        "--cert-dir",
        type=Path,
        default=None,
        help="where the certificate is kept across restarts (default: a new one in a temp dir)",
    )
    parser.add_argument(
        "--smart",
        choices=[SMART_OFF, SMART_UPSTREAM, SMART_FORK],
        default=SMART_UPSTREAM,
        help="mcp-tools /search/smart extension",
    )
    parser.add_argument(
        "--query-vectors",
        type=Path,
        default=None,
        help="JSON lines of query vectors (default <vault>/../query_vectors.jsonl)",
    )
    parser.add_argument("--latency-ms", type=float, default=None)
    parser.add_argument("--fail-every", type=int, default=None)
    parser.add_argument("--hang-pattern", default=None, help="regex on the request path")
    parser.add_argument("--drop-every", type=int, default=None)
    parser.add_argument(
        "--link-index-pending",
        action="store_true",
        help="6.x: start before Obsidian has resolved the vault's links (links null)",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    vault: Path = args.vault
    if not vault.is_dir():
        print(f"standin: vault folder not found: {vault}", file=sys.stderr)
        return 2
    faults = Faults()
    try:
        faults.update(
            {
                "latency_ms": args.latency_ms,
                "fail_every": args.fail_every,
                "hang_pattern": args.hang_pattern,
                "drop_every": args.drop_every,
                "link_index_pending": args.link_index_pending or None,
            }
        )
    except ValueError as exc:
        print(f"standin: {exc}", file=sys.stderr)
        return 2

    with tempfile.TemporaryDirectory(prefix="standin-cert-") as tmp:
        cert = load_or_generate_certificate(
            args.cert_dir or Path(tmp),
            args.binding_host,
            tuple(args.subject_alt_names.split(",")),
        )
        api_key = args.api_key or secrets.token_hex(32)
        config = Config(
            vault=vault,
            plugin_version=args.plugin_version,
            api_key=api_key,
            smart=args.smart,
            certificate=cert,
            query_vectors=args.query_vectors,
        )
        tls: ssl.SSLContext | None = None
        if not args.http:
            tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            tls.load_cert_chain(cert.cert_path, cert.key_path)
        state = State(config, faults)
        server = StandinServer(state, args.binding_host, args.port, tls)
        port = server.server_address[1]

        stop = threading.Event()

        def on_signal(signum: int, frame: FrameType | None) -> None:
            stop.set()

        signal.signal(signal.SIGTERM, on_signal)
        signal.signal(signal.SIGINT, on_signal)
        loop = threading.Thread(
            target=server.serve_forever, args=(0.1,), name="standin-serve", daemon=True
        )
        loop.start()
        scheme = "http" if args.http else "https"
        # Listening on every address, it answers on the one its certificate names.
        host = DEFAULT_BINDING_HOST if args.binding_host == "0.0.0.0" else args.binding_host
        ready = {
            "url": f"{scheme}://{host}:{port}",
            "port": port,
            "cert": str(cert.cert_path),
            "api_key": api_key,
            "plugin_version": args.plugin_version,
        }
        print(json.dumps(ready), flush=True)
        print(
            f"standin: Local REST API {args.plugin_version} over {vault.resolve()} at "
            f"{ready['url']} (smart={args.smart})",
            file=sys.stderr,
        )
        while not stop.wait(0.1):
            pass
        print("standin: stopping", file=sys.stderr)
        state.stopping.set()
        server.shutdown()
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
