"""calico's IPIP device on a node (pure): tunl0, the kernel's fallback IPIP device, and its address;
read by the spec and by the wiring (`plan`)."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kpemu.model.topology import Node

TUNNEL = "tunl0"


def tunnel_ip(node: Node) -> str:
    """tunl0's address: tunnelIP, else the first address of the node's block (kpemu layout)."""
    return node.tunnelIP or str(ipaddress.IPv4Network(node.podCIDR).network_address + 1)


def addresses(node: Node) -> tuple[str, ...]:
    """tunl0's address."""
    return (tunnel_ip(node),)
