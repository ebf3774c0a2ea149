# pyright: strict
"""Certificates pinned by SHA-256, for a Local REST API on any host.

The plugin's self-signed certificate names 127.0.0.1 only (its `subjectAltName`), so
reaching Obsidian as `host.docker.internal` or a Windows host's address fails the host
name check. A pin replaces that check with a stricter one: the certificate the server
presents must be exactly the pinned one (its SHA-256 over the DER bytes). The pin is
checked in the TLS handshake, before a byte of the request (or the API key) is sent.
Verification is never switched off on this path.
"""

import hashlib
import json
import logging
import ssl
from pathlib import Path
from typing import ClassVar, cast

from obsidian_mcp.config import Settings, is_loopback, normalized_fingerprint

logger = logging.getLogger(__name__)

PINS_FILE = "certificate-pins.json"


def fingerprint_of_der(der: bytes) -> str:
    digest = hashlib.sha256(der).hexdigest().upper()
    return ":".join(digest[i : i + 2] for i in range(0, len(digest), 2))


def fingerprint(pem: str) -> str:
    """The SHA-256 fingerprint of a PEM certificate, as `AB:CD:...`."""
    return fingerprint_of_der(ssl.PEM_cert_to_DER_cert(pem))


class PinMismatch(ssl.SSLCertVerificationError):
    """The server's certificate is not the pinned one; `seen` is the one it presented."""

    def __init__(self, seen: str, pinned: str) -> None:
        self.seen = seen
        self.pinned = pinned
        message = f"certificate SHA-256 {seen} is not the pinned {pinned}"
        super().__init__(message)
        # anyio reads strerror of every ssl.SSLError it sees in a handshake.
        self.strerror = message


class _PinnedObject(ssl.SSLObject):
    """An SSLObject that ends its handshake by checking the server's certificate against
    the pin (`SSLContext.sslobject_class` makes each connection one of these)."""

    pin: ClassVar[str] = ""

    def do_handshake(self) -> None:
        super().do_handshake()
        der = self.getpeercert(binary_form=True)
        seen = fingerprint_of_der(der) if der else "(no certificate offered)"
        if seen != self.pin:
            raise PinMismatch(seen, self.pin)


def pinned_context(pin: str) -> ssl.SSLContext:
    """A client context that accepts exactly the certificate of this SHA-256 fingerprint,
    whatever host name it names; the pin check replaces both chain and name checks."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE  # the handshake's own check is `_PinnedObject`'s
    context.sslobject_class = type(
        "PinnedObject", (_PinnedObject,), {"pin": normalized_fingerprint(pin)}
    )
    return context


def pin_mismatch_in(exc: BaseException) -> PinMismatch | None:
    """The pin mismatch behind a failed request, if that is why it failed."""
    current: BaseException | None = exc
    while current is not None:
        if isinstance(current, PinMismatch):
            return current
        current = current.__cause__ or current.__context__
    return None


# -- pins stored by `obsidian-mcp trust --url` ---------------------------------------------


def _pins(config_dir: Path) -> dict[str, str]:
    file = config_dir / PINS_FILE
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        logger.warning("the certificate pins in %s cannot be read (%s); none are used", file, exc)
        return {}
    if not isinstance(data, dict):
        return {}
    return {str(url): str(pin) for url, pin in cast(dict[object, object], data).items()}


def stored_pin(config_dir: Path, url: str) -> str | None:
    """The pin `trust --url` stored for this REST API address, if any."""
    return _pins(config_dir).get(url)


def store_pin(config_dir: Path, url: str, pin: str) -> Path:
    """Pin this fingerprint for the address (replacing its earlier pin); the file."""
    pins = _pins(config_dir) | {url: normalized_fingerprint(pin)}
    config_dir.mkdir(parents=True, exist_ok=True)
    file = config_dir / PINS_FILE
    temporary = file.with_suffix(".tmp")
    temporary.write_text(json.dumps(pins, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    temporary.replace(file)
    return file


def configured_pin(settings: Settings) -> str | None:
    """The SHA-256 fingerprint the REST API's certificate must have, if it is pinned: by
    `cert_sha256`, else (unless a certificate file is named) by `trust --url`. Whatever
    OBSIDIAN_VERIFY_TLS says: no setting switches a pin off."""
    if not settings.uses_https:
        return None
    if settings.cert_sha256 is not None or settings.cert is not None:
        return settings.cert_sha256
    return stored_pin(settings.config_dir, settings.base_url)


def unverified_tls_refusal(settings: Settings) -> str | None:
    """Why OBSIDIAN_VERIFY_TLS=false cannot be honoured for this REST API, if it cannot:
    it would switch off a pin or a named certificate, or send the key unverified to
    another machine. None when verification is on, when there is no key to send, or when
    it is off for this machine's loopback with nothing pinned (the one case it is for: a
    plugin certificate not yet trusted)."""
    if settings.api_key is None or not settings.uses_https or settings.verify_tls:
        return None  # no key to protect, or verified
    url = settings.base_url
    pin = configured_pin(settings)
    if pin is not None or settings.cert is not None:
        pinned = f"pinned to SHA-256 {pin}" if pin is not None else f"OBSIDIAN_CERT={settings.cert}"
        return (
            f"OBSIDIAN_VERIFY_TLS=false would switch off the certificate check of {url} "
            f"({pinned}); a pin is never switched off, so nothing is sent. Remove "
            "OBSIDIAN_VERIFY_TLS: the pin keeps the connection verified. If the plugin made a "
            f"new certificate, pin it again with `obsidian-mcp trust --url {url}`."
        )
    if not is_loopback(settings.rest_host):
        return (
            f"OBSIDIAN_VERIFY_TLS=false is accepted only for a REST API on this machine "
            f"(127.0.0.1, ::1, localhost), not for {settings.rest_host}: the API key would go "
            "to whoever answers there. Remove OBSIDIAN_VERIFY_TLS and pin the certificate "
            f"instead: `obsidian-mcp trust --url {url}`."
        )
    return None


def presented_certificate(host: str, port: int, timeout: float) -> str:
    """The certificate a TLS server presents, as PEM, not verified: what a pin is made from.
    (The plugin's download route may serve another certificate than the one it presents.)"""
    return ssl.get_server_certificate((host, port), timeout=timeout)
