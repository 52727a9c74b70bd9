"""flannel with its VXLAN backend and the bridge CNI plugin (cni0): the spec; the wiring is in `plan`.

A node gets flannel.1 (VNI 1, UDP 8472) with <podCIDR>.0/32 and cni0 with <podCIDR>.1, the
addresses kube-proxy finds on it besides its underlay IP.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from kpemu.cni.flannel_vxlan.devices import BRIDGE, PORT, VNI, VTEP, addresses
from kpemu.cni.spec import Cni

if TYPE_CHECKING:
    from kpemu.model.topology import Topology
    from kpemu.plan.parts import Parts

NAME = "flannel-vxlan"
ANNOTATION_PREFIX = "flannel.alpha.coreos.com/"
BACKEND_ANNOTATION = ANNOTATION_PREFIX + "backend-type"


def recognise(annotations: Mapping[str, str]) -> tuple[str, dict[str, str]] | None:
    """flanneld annotates every node; its backend-type says which backend (vxlan when absent)."""
    if not any(k.startswith(ANNOTATION_PREFIX) for k in annotations):
        return None
    backend = annotations.get(BACKEND_ANNOTATION, "vxlan")
    return (NAME if backend == "vxlan" else f"flannel-{backend}", {})


def _plan(topo: Topology, p: Parts) -> None:
    from kpemu.cni.flannel_vxlan.plan import plan

    plan(topo, p)


CNI = Cni(
    name=NAME, project="flannel", plan=_plan, addresses=addresses,
    pod_device=BRIDGE, tunnel_device=VTEP,
    overlay_label=f"VXLAN VNI {VNI} ({VTEP}, UDP {PORT})", node_label=f"{VTEP} / {BRIDGE}",
    features=("vxlan", "br_netfilter"), vxlan_ports=(PORT,), masquerade_chains=("FLANNEL-POSTRTG",),
    annotations=(BACKEND_ANNOTATION, ANNOTATION_PREFIX + "public-ip"), recognise=recognise,
)
