"""nftables-mode chain and set names (pkg/proxy/nftables: hashAndTruncate and friends).

A service port's base name is "<ns>/<svc>/<proto>/<portName>", an endpoint's adds
"__<ip>/<port>" (IPv6 colons become dots); each is prefixed with the first 8 characters of
base32(sha256(name)) and cut to 240 characters. Prefixes: service- (Cluster policy), local-
(Local policy), external-, firewall-, endpoint-, affinity-.
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

# knftables NameLengthMax (256) minus the longest prefix (16).
NAME_BASE_MAX = 240


@lru_cache(maxsize=65536)
def hash_and_truncate(name: str) -> str:
    """hashAndTruncate: "<8 base32 chars of sha256(name)>-<name>", at most 240 characters."""
    digest = base64.b32encode(hashlib.sha256(name.encode()).digest()).decode()
    out = f"{digest[:8]}-{name}"
    return out if len(out) <= NAME_BASE_MAX else out[: NAME_BASE_MAX - 3] + "..."


def service_base(namespace: str, service: str, proto: str, port_name: str) -> str:
    """servicePortChainNameBase, e.g. "ULMVA6XW-ns1/svc1/tcp/p80"."""
    return hash_and_truncate(f"{namespace}/{service}/{proto.lower()}/{port_name}")


def endpoint_base(namespace: str, service: str, proto: str, port_name: str, ip: str, port: int) -> str:
    """servicePortEndpointChainNameBase, e.g. "5OJB2KTY-ns1/svc1/tcp/p80__10.180.0.1/80"."""
    return hash_and_truncate(f"{namespace}/{service}/{proto.lower()}/{port_name}__{ip.replace(':', '.')}/{port}")
