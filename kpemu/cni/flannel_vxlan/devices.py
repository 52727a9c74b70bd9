"""flannel's devices on a node (pure): flannel.1 (VNI 1, UDP 8472) and the bridge plugin's cni0, and
the addresses they carry; read by the spec and by the wiring (`plan`)."""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kpemu.model.topology import Node

VNI = 1
PORT = 8472
VTEP = "flannel.1"
BRIDGE = "cni0"


def addresses(node: Node) -> tuple[str, ...]:
    """flannel.1's address (<podCIDR>.0) and cni0's (<podCIDR>.1)."""
    net = ipaddress.IPv4Network(node.podCIDR)
    return (str(net.network_address), str(net.network_address + 1))
