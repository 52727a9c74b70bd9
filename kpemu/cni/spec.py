"""What one CNI says about itself (pure data and functions): the `Cni` spec each CNI package exports
as `CNI`, read through the registry (kpemu.cni)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kpemu.model.topology import Node, Topology
    from kpemu.plan.parts import Parts

# (topology, the plan being built): add the CNI's devices, pod wiring, routes and rules on every node
Planner = Callable[["Topology", "Parts"], None]
# a Node's annotations -> (the CNI they say, possibly another backend of the same project kpemu does not
# model, and the topology node fields they give), or None when they are not this project's
Recogniser = Callable[[Mapping[str, str]], "tuple[str, dict[str, str]] | None"]


@dataclass(frozen=True)
class DeviceNeed:
    """A device the CNI configures that a kernel without its module lacks: a deploy step whose input
    names `device` and fails with `error` in its stderr is reported as `problem`, with `fix`."""

    device: str
    error: str
    problem: str
    fix: str

    def to_json(self) -> dict[str, str]:
        return asdict(self)


def _no_annotations(_: Mapping[str, str]) -> None:
    return None


@dataclass(frozen=True)
class Cni:
    """Everything kpemu asks about one CNI."""

    name: str  # the topology's `cni:` value
    project: str  # whose CNI it is ("flannel", "calico"): how users and messages call it
    plan: Planner
    addresses: Callable[[Node], tuple[str, ...]]  # the node's own addresses on the CNI's devices
    pod_device: str  # the device a node reaches its pods by (a bridge, or the tunnel for routed pods)
    tunnel_device: str  # the device that carries pod traffic between nodes
    overlay_label: str  # the picture: the link between two nodes
    node_label: str  # the picture: the CNI's devices on a node
    tunnel_ip: bool = False  # whether nodes[].tunnelIP is this CNI's (the tunnel device's address)
    features: tuple[str, ...] = ()  # kernel.probe features the CNI needs
    device_needs: tuple[DeviceNeed, ...] = ()
    vxlan_ports: tuple[int, ...] = ()  # UDP ports of its VXLAN underlay packets (Wireshark decodes them)
    masquerade_chains: tuple[str, ...] = ()  # nat chains holding its own MASQUERADE rules (no-masquerade removes them)
    annotations: tuple[str, ...] = ()  # the Node annotations `kpemu import` reads for it
    recognise: Recogniser = _no_annotations
