"""Certificates a test makes with the openssl command: a CA, a server certificate for 127.0.0.1 and
client certificates, signed by that CA or by another."""
from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


@dataclass(frozen=True)
class Pair:
    key: Path
    cert: Path

    def read(self) -> tuple[bytes, bytes]:
        """(PEM key, PEM certificate), as gRPC takes them."""
        return self.key.read_bytes(), self.cert.read_bytes()


def ca(folder: Path, name: str = "ca") -> Pair:
    pair = Pair(folder / f"{name}.key", folder / f"{name}.pem")
    _openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
             "-keyout", str(pair.key), "-out", str(pair.cert))
    return pair


def signed(folder: Path, by: Pair, name: str, san: str | None = None) -> Pair:
    """A certificate named ``name`` signed by ``by`` (``san``: e.g. ``IP:127.0.0.1`` for a server)."""
    pair, csr = Pair(folder / f"{name}.key", folder / f"{name}.pem"), folder / f"{name}.csr"
    _openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", str(pair.key),
             "-out", str(csr))
    ext = folder / f"{name}.ext"
    ext.write_text(f"subjectAltName={san}\n" if san else "basicConstraints=CA:FALSE\n")
    _openssl("x509", "-req", "-in", str(csr), "-CA", str(by.cert), "-CAkey", str(by.key), "-CAcreateserial",
             "-days", "1", "-extfile", str(ext), "-out", str(pair.cert))
    return pair
