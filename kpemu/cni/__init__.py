"""The CNI registry: the CNIs kpemu models, each a package of its own that exports its spec as `CNI`.

Everything the rest of kpemu asks about a CNI is in its spec (kpemu.cni.spec.Cni): how it wires a
node, the addresses it gives a node, its device names, what it needs of the kernel, how it is
drawn, how its packets are decoded, how `kpemu import` recognises it. Nothing outside a CNI's
package names a CNI. The names live in kpemu.cni.catalog, which imports nothing (the model reads
them to validate `cni:` and must not pull in plan code); a CNI's package is imported the first time
its spec is asked for, and its plan module only when a lab is planned. Adding a CNI is its own
package plus one line in `catalog.CNIS`.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, cast

from kpemu.cni.catalog import CNIS, expected
from kpemu.errors import InputError, Problem

if TYPE_CHECKING:
    from kpemu.cni.spec import Cni
    from kpemu.model.topology import Topology


def cni(name: str) -> Cni:
    """The spec of CNI `name`; InputError naming the field `cni` when kpemu does not model it."""
    try:
        entry = CNIS[name]
    except KeyError:
        raise InputError([Problem("", "cni", f"{expected()} (got {name!r})")]) from None
    return import_module(entry).CNI if isinstance(entry, str) else cast("Cni", entry)


def cni_of(topo: Topology) -> Cni:
    """The spec of a topology's CNI."""
    return cni(topo.cni)


def specs() -> list[Cni]:
    """Every registered CNI's spec, in registry order."""
    return [cni(name) for name in CNIS]


def node_addresses(topo: Topology, node: str) -> tuple[str, ...]:
    """A node's own addresses in the lab: its underlay IP, then those the CNI puts on its devices
    (kube-proxy's IPVS mode finds them as the node's addresses; the oracle treats them as local)."""
    n = topo.node(node)
    return (n.ip, *cni_of(topo).addresses(n))


def masquerade_chains() -> tuple[str, ...]:
    """The nat chains any CNI masquerades in, in registry order."""
    return tuple(dict.fromkeys(c for spec in specs() for c in spec.masquerade_chains))


def vxlan_ports() -> tuple[int, ...]:
    """The UDP ports any CNI sends VXLAN on, in registry order (Wireshark must be told to decode them)."""
    return tuple(dict.fromkeys(p for c in specs() for p in c.vxlan_ports))
