"""kube-proxy chain names and service port names (reference section 2.4).

`S` (the service port name) is `ServicePortName.String()`: "<ns>/<svc>:<port name>", but without
the ":" when the port is unnamed, from v1.19 on. Before 1.19 the colon was always present, so the
hashes of unnamed ports differ between eras (e.g. "default/nginx:" -> 4N57TFCL4MD7ZTDA).
"""

from __future__ import annotations

import base64
import hashlib
from functools import lru_cache

# kube-proxy's nfacct counters (pkg/proxy/iptables/proxier.go nfAcctCounters; since when: versions.py)
NFACCT_COUNTERS = ("ct_state_invalid_dropped_pkts", "localhost_nps_accepted_pkts")

# Chain prefixes (iptables mode). KUBE-XLB is the pre-1.24 eTP=Local chain.
SVC, SVL, EXT, FW, XLB, SEP = "KUBE-SVC-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-XLB-", "KUBE-SEP-"


def go_hex(v: int) -> str:
    """`v` as Go's fmt.Sprintf("%#08x", v) writes it, as kube-proxy renders marks: 0x4000 -> 0x00004000."""
    return f"0x{v:08x}"


@lru_cache(maxsize=65536)
def _b32_16(data: str) -> str:
    # 16 base32 characters are 80 bits: encoding the first 10 bytes gives the same prefix, faster.
    return base64.b32encode(hashlib.sha256(data.encode()).digest()[:10]).decode()


def port_proto_hash(svc_port_name: str, proto: str) -> str:
    """Hash used by KUBE-SVC/SVL/EXT/FW/XLB chains: base32(sha256(S + proto))[:16]."""
    return _b32_16(svc_port_name + proto.lower())


def sep_hash(svc_port_name: str, proto: str, endpoint: str) -> str:
    """Hash used by KUBE-SEP chains; `endpoint` is net.JoinHostPort(ip, port)."""
    return _b32_16(svc_port_name + proto.lower() + endpoint)


def join_host_port(ip: str, port: int) -> str:
    """net.JoinHostPort: IPv6 addresses get brackets."""
    return f"[{ip}]:{port}" if ":" in ip else f"{ip}:{port}"


def service_port_name(namespace: str, name: str, port_name: str, colon_when_unnamed: bool) -> str:
    """`S` for one service port; `colon_when_unnamed` is True before kube-proxy 1.19."""
    if port_name or colon_when_unnamed:
        return f"{namespace}/{name}:{port_name}"
    return f"{namespace}/{name}"


def svc_chain(s: str, proto: str) -> str:
    """KUBE-SVC-<hash>: the Cluster-policy endpoint chain."""
    return SVC + port_proto_hash(s, proto)


def svl_chain(s: str, proto: str) -> str:
    """KUBE-SVL-<hash>: the Local-policy endpoint chain (1.24+)."""
    return SVL + port_proto_hash(s, proto)


def ext_chain(s: str, proto: str) -> str:
    """KUBE-EXT-<hash>: external destinations (1.24+)."""
    return EXT + port_proto_hash(s, proto)


def fw_chain(s: str, proto: str) -> str:
    """KUBE-FW-<hash>: loadBalancerSourceRanges allow-list."""
    return FW + port_proto_hash(s, proto)


def xlb_chain(s: str, proto: str) -> str:
    """KUBE-XLB-<hash>: the legacy (pre-1.24) eTP=Local chain."""
    return XLB + port_proto_hash(s, proto)


def sep_chain(s: str, proto: str, endpoint: str) -> str:
    """KUBE-SEP-<hash> for one endpoint ("ip:port")."""
    return SEP + sep_hash(s, proto, endpoint)
