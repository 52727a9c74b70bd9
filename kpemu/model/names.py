"""Names derived from Kubernetes names: namespaces, interface names (15-character limit), MACs."""

from __future__ import annotations

import hashlib

from kpemu.statedir import PREFIX

IFNAMSIZ = 15
NETNS_NAME_MAX = 255  # a named namespace is a file /run/netns/<name>: NAME_MAX


def netns_name(lab: str, name: str) -> str:
    """The network namespace of a lab member: kp-<lab>-<name>."""
    return f"{PREFIX}{lab}-{name}"


def short_ifname(prefix: str, name: str) -> str:
    """`prefix + name` if it fits in 15 characters, else prefix + head of name + 4 hex of its hash."""
    full = prefix + name
    if len(full) <= IFNAMSIZ:
        return full
    digest = hashlib.sha1(name.encode()).hexdigest()[:4]
    return prefix + name[: IFNAMSIZ - len(prefix) - 5] + "-" + digest


def stable_mac(seed: str) -> str:
    """A locally administered unicast MAC derived from `seed` (stable across runs)."""
    b = hashlib.sha1(seed.encode()).digest()[:5]
    return "02:" + ":".join(f"{x:02x}" for x in b)
