"""Self-signed certificate shaped like the one the plugin makes with node-forge.

RSA 2048, SHA-256, 365 days, subject and issuer CN "Obsidian Local REST API",
``basicConstraints CA:true`` (so the PEM is its own CA bundle) and a subjectAltName of
**IP 127.0.0.1 only**: as with the real plugin, verifying against ``localhost`` fails.
Like the plugin (`onload` in its src/main.ts), a certificate made while a binding host other
than 0.0.0.0 is set names that address too, and the "Certificate hostnames" setting adds
DNS names. Made once per ``--cert-dir`` and kept there, as the plugin keeps its own: changing
the binding host later does not change it (the plugin regenerates only on request).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

CERT_NAME = "obsidian-local-rest-api.crt"
COMMON_NAME = "Obsidian Local REST API"


@dataclass(frozen=True)
class CertificateFiles:
    cert_path: Path
    key_path: Path
    pem: bytes
    not_after: dt.datetime


DEFAULT_BINDING_HOST = "127.0.0.1"


def load_or_generate_certificate(
    cert_dir: Path, binding_host: str = DEFAULT_BINDING_HOST, alt_names: tuple[str, ...] = ()
) -> CertificateFiles:
    """The certificate already in ``cert_dir`` if there is one, as the plugin keeps its
    certificate across Obsidian restarts; else a new one written there."""
    cert_path, key_path = cert_dir / "cert.pem", cert_dir / "key.pem"
    if not (cert_path.is_file() and key_path.is_file()):
        return generate_certificate(cert_dir, binding_host, alt_names)
    pem = cert_path.read_bytes()
    not_after = x509.load_pem_x509_certificate(pem).not_valid_after_utc
    return CertificateFiles(cert_path.resolve(), key_path.resolve(), pem, not_after)


def subject_alt_names(binding_host: str, alt_names: tuple[str, ...]) -> list[x509.GeneralName]:
    """127.0.0.1, the binding host unless it is 0.0.0.0 (an IP, else a DNS name), and the
    extra host names (`buildSubjectAltNames` upstream)."""
    names: list[x509.GeneralName] = [x509.IPAddress(ipaddress.ip_address(DEFAULT_BINDING_HOST))]
    if binding_host not in (DEFAULT_BINDING_HOST, "0.0.0.0"):
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(binding_host)))
        except ValueError:
            names.append(x509.DNSName(binding_host))
    names += [x509.DNSName(name.strip()) for name in alt_names if name.strip()]
    return names


def generate_certificate(
    cert_dir: Path, binding_host: str = DEFAULT_BINDING_HOST, alt_names: tuple[str, ...] = ()
) -> CertificateFiles:
    """Write ``cert.pem`` and ``key.pem`` into ``cert_dir`` and describe them."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, COMMON_NAME)])
    now = dt.datetime.now(dt.UTC)
    not_after = now + dt.timedelta(days=365)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=1))
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.SubjectAlternativeName(subject_alt_names(binding_host, alt_names)),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_dir.mkdir(parents=True, exist_ok=True)
    pem = cert.public_bytes(serialization.Encoding.PEM)
    cert_path = (cert_dir / "cert.pem").resolve()
    key_path = (cert_dir / "key.pem").resolve()
    cert_path.write_bytes(pem)
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return CertificateFiles(cert_path, key_path, pem, not_after)
