"""The control plane's secrets, made with the openssl command line: a self-signed serving certificate
for 127.0.0.1 (clients trust it as their CA), a service-account key pair, and a static token."""

from __future__ import annotations

import secrets
import shutil
import subprocess

from kpemu.controlplane.flags import HOST, Layout, token_line
from kpemu.errors import EnvironmentProblem


def _openssl(*args: str) -> None:
    tool = shutil.which("openssl")
    if tool is None:
        raise EnvironmentProblem("the control plane's certificate needs the openssl command, and there is none",
                                 "apt-get install openssl")
    res = subprocess.run([tool, *args], capture_output=True, text=True, timeout=120)
    if res.returncode != 0:
        raise EnvironmentProblem(f"openssl {args[0]} failed: {res.stderr.strip()[:400]}")


def make(layout: Layout) -> str:
    """Write the serving certificate and key, the service-account key pair and the token file; the token."""
    layout.pki.mkdir(parents=True, exist_ok=True, mode=0o700)
    _openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
             "-keyout", str(layout.serving_key), "-out", str(layout.serving_cert), "-days", "7",
             "-subj", "/CN=kpemu-kube-apiserver", "-addext", f"subjectAltName=IP:{HOST},DNS:localhost",
             "-addext", "basicConstraints=critical,CA:TRUE",
             "-addext", "keyUsage=critical,digitalSignature,keyCertSign",
             "-addext", "extendedKeyUsage=serverAuth")
    _openssl("genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048", "-out", str(layout.sa_key))
    _openssl("pkey", "-in", str(layout.sa_key), "-pubout", "-out", str(layout.sa_pub))
    token = secrets.token_hex(24)
    layout.tokens.write_text(token_line(token))
    layout.tokens.chmod(0o600)
    return token
