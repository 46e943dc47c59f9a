"""Throw-away TLS material for the secure test services, made with the ``openssl`` and ``keytool`` command lines.

One run makes, in one folder (EC P-256 keys: fast to make, accepted by Java 17, OpenSSL and Python's ``ssl``):

* a CA (``ca.pem``) that signs everything else;
* a node certificate whose only name is the IP address ``127.0.0.1`` (no ``localhost``: a client that dials
  ``localhost`` with hostname checking on must refuse it), as PEM and as a PKCS12 keystore for the JVMs;
* on request, a PKCS12 truststore holding the CA, for a JVM that verifies client certificates (mutual TLS);
* a client certificate signed by the CA (for mutual TLS).

The keys are not encrypted and the store password is fixed: this is test material, never for production.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from om_stream.devservices.jvm import DevServiceError, java_binary

__all__ = ["STORE_PASSWORD", "CertificateSet", "make_certificates"]

STORE_PASSWORD = "om-stream-test"  # the password of throw-away test keystores
_DAYS = "3"


@dataclass(frozen=True)
class CertificateSet:
    folder: Path

    @property
    def ca_file(self) -> Path:
        return self.folder / "ca.pem"

    @property
    def node_cert(self) -> Path:
        return self.folder / "node.pem"

    @property
    def node_key(self) -> Path:
        return self.folder / "node.key"

    @property
    def keystore(self) -> Path:
        """PKCS12: the node's key, its certificate and the CA's."""
        return self.folder / "node.p12"

    @property
    def truststore(self) -> Path:
        """PKCS12: the CA as a trusted certificate."""
        return self.folder / "trust.p12"

    @property
    def client_cert(self) -> Path:
        return self.folder / "client.pem"

    @property
    def client_key(self) -> Path:
        return self.folder / "client.key"


def _run(argv: list[str], folder: Path) -> None:
    done = subprocess.run(argv, cwd=folder, capture_output=True, text=True, stdin=subprocess.DEVNULL, check=False)
    if done.returncode != 0:
        raise DevServiceError(f"{argv[0]} {argv[1]} failed (rc={done.returncode}): {done.stderr.strip()[-800:]}")


def _openssl() -> str:
    found = shutil.which("openssl")
    if not found:
        raise DevServiceError("the openssl command is needed to make test certificates (apt-get install openssl)")
    return found


def _keytool() -> str:
    keytool = Path(java_binary()).with_name("keytool")
    if keytool.exists():
        return str(keytool)
    found = shutil.which("keytool")
    if not found:
        raise DevServiceError("keytool (from the JDK) is needed to make the test truststore")
    return found


def _signed(openssl: str, folder: Path, name: str, subject: str, extensions: str) -> None:
    """``name``.key and ``name``.pem: a fresh key and its certificate, signed by the CA."""
    (folder / f"{name}.ext").write_text(extensions)
    _run([openssl, "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
          "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subject], folder)
    _run([openssl, "x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
          "-days", _DAYS, "-sha256", "-out", f"{name}.pem", "-extfile", f"{name}.ext"], folder)


def make_certificates(folder: Path, *, truststore: bool = False) -> CertificateSet:
    """Make the CA, the node and client certificates and the node's keystore in ``folder`` (well under 1 s), and
    with ``truststore`` the JVM truststore too (keytool: a JVM start, 1-4 s on a busy machine)."""
    folder.mkdir(parents=True, exist_ok=True)
    openssl = _openssl()
    _run([openssl, "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
          "-keyout", "ca.key", "-out", "ca.pem", "-days", _DAYS, "-sha256", "-subj", "/CN=om-stream test CA",
          "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign"], folder)
    _signed(openssl, folder, "node", "/CN=127.0.0.1",
            "subjectAltName=IP:127.0.0.1\nkeyUsage=critical,digitalSignature\n"
            "extendedKeyUsage=serverAuth,clientAuth\n")
    _signed(openssl, folder, "client", "/CN=om_stream",
            "keyUsage=critical,digitalSignature\nextendedKeyUsage=clientAuth\n")
    _run([openssl, "pkcs12", "-export", "-in", "node.pem", "-inkey", "node.key", "-certfile", "ca.pem",
          "-name", "node", "-out", "node.p12", "-passout", f"pass:{STORE_PASSWORD}"], folder)
    if truststore:
        _run([_keytool(), "-importcert", "-noprompt", "-alias", "om-stream-test-ca", "-file", "ca.pem",
              "-keystore", "trust.p12", "-storetype", "PKCS12", "-storepass", STORE_PASSWORD], folder)
    return CertificateSet(folder)
