"""calico in IPIP mode: the spec; the wiring is in `plan`.

A node's pods are routed (no bridge) and reach other nodes through tunl0, the kernel's fallback
IPIP device, whose address (nodes[].tunnelIP, default <podCIDR>.1) is the one kube-proxy finds on
the node besides its underlay IP.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kpemu.cni.calico_ipip.devices import TUNNEL, addresses
from kpemu.cni.spec import Cni, DeviceNeed

if TYPE_CHECKING:
    from kpemu.model.topology import Topology
    from kpemu.plan.parts import Parts

NAME = "calico-ipip"
IPIP_ANNOTATION = "projectcalico.org/IPv4IPIPTunnelAddr"
VXLAN_ANNOTATION = "projectcalico.org/IPv4VXLANTunnelAddr"


def recognise(annotations: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
    """calico-node annotates the node with its tunnel address, IPIP or VXLAN."""
    if annotations.get(IPIP_ANNOTATION):
        return NAME, {"tunnelIP": str(annotations[IPIP_ANNOTATION]).split("/")[0]}
    if annotations.get(VXLAN_ANNOTATION):
        return "calico-vxlan", {}
    return None


def _plan(topo: Topology, p: Parts) -> None:
    from kpemu.cni.calico_ipip.plan import plan

    plan(topo, p)


CNI = Cni(
    name=NAME, project="calico", plan=_plan, addresses=addresses,
    pod_device=TUNNEL, tunnel_device=TUNNEL, overlay_label=f"IPIP ({TUNNEL})", node_label=TUNNEL,
    tunnel_ip=True, features=("ipip", "ipset:hash:ip"), masquerade_chains=("cali-nat-outgoing",),
    device_needs=(DeviceNeed(TUNNEL, "Cannot find device",
                             f"this kernel has no IPIP tunnel (module ipip), which cni: {NAME} needs",
                             "run with --runtime vm (a guest kernel with ipip), or `modprobe ipip`"),),
    annotations=(IPIP_ANNOTATION, "projectcalico.org/IPv4Address"), recognise=recognise,
)
