"""Names derived from Kubernetes names: namespaces and interface names (15-character limit)."""

from __future__ import annotations

import hashlib

IFNAMSIZ = 15
NETNS_NAME_MAX = 255  # a named namespace is a file /run/netns/<name>: NAME_MAX


def netns_name(lab: str, name: str) -> str:
    """The network namespace of a lab member: kp-<lab>-<name>."""
    return f"kp-{lab}-{name}"


def short_ifname(prefix: str, name: str) -> str:
    """`prefix + name` if it fits in 15 characters, else prefix + head of name + 4 hex of its hash."""
    full = prefix + name
    if len(full) <= IFNAMSIZ:
        return full
    digest = hashlib.sha1(name.encode()).hexdigest()[:4]
    return prefix + name[: IFNAMSIZ - len(prefix) - 5] + "-" + digest


def calico_ifname(namespace: str, pod: str) -> str:
    """Calico's host-side veth name: cali + sha1("<namespace>.<pod>")[:11] (VethNameForWorkload)."""
    return "cali" + hashlib.sha1(f"{namespace}.{pod}".encode()).hexdigest()[:11]


def flannel_ifname(namespace: str, pod: str) -> str:
    """The bridge plugin's host-side veth: veth + 8 hex (random upstream; derived here, so stable)."""
    return "veth" + hashlib.sha1(f"{namespace}/{pod}".encode()).hexdigest()[:8]
