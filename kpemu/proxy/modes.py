"""The proxy-mode registry: one entry per kube-proxy mode, each from its own package.

An entry (kpemu.proxy.proxymode.ProxyMode) says the releases that have the mode, the `kpemu rules`
formats it produces and how to make them for a node, the steps that program a node as kube-proxy
does (kpemu.plan.batch.Step, run by the lab's job on whichever kernel) with what the kernel must read
back, how its packets are traced, what the offline oracle walks and which probed features the kernel
must have. All pure. Adding a mode is its own package plus one line here.
"""

from __future__ import annotations

from kpemu.errors import InputError
from kpemu.model.topology import Topology
from kpemu.proxy import iptables, ipvs, nftables
from kpemu.proxy.proxymode import ProxyMode

MODES: dict[str, ProxyMode] = {m.name: m for m in (
    iptables.MODE,
    ipvs.MODE,
    nftables.MODE,
)}
# Every `kpemu rules --format` value, in the order `--format all` prints them.
ALL_FORMATS = tuple(dict.fromkeys(f for m in MODES.values() for f in m.formats))


def mode(name: str) -> ProxyMode:
    """The registry entry for `name`; InputError naming kubeProxy.mode for an unknown one."""
    try:
        return MODES[name]
    except KeyError:
        raise InputError(f"kubeProxy.mode {name!r} is not a kube-proxy mode kpemu models; expected one of "
                         f"{', '.join(MODES)}") from None


def mode_of(topo: Topology) -> ProxyMode:
    """The registry entry of a topology's kubeProxy.mode."""
    return mode(topo.kubeProxy.mode)


def node_texts(topo: Topology, node: str) -> dict[str, str]:
    """Every `kpemu rules` format for `node`; formats of other modes say this mode has no such state."""
    m = mode_of(topo)
    texts = m.texts(topo, node)
    none = f"# kube-proxy mode {m.name}: node {node} has no {{}} state\n"
    return {f: texts.get(f, none.format(f)) for f in ALL_FORMATS}
