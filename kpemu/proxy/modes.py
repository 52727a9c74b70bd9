"""The proxy-mode registry: one entry per kube-proxy mode, each from its own package.

An entry (kpemu.proxy.proxymode.ProxyMode) says the releases that have the mode (kpemu.model.modes),
the `kpemu rules` formats it produces, how one node's state is built (kpemu.proxy.state: the texts, the
steps that program the node as kube-proxy does, what the kernel must read back, what the offline
oracle walks), what is read back, how its packets are traced and which probed features the kernel
must have. All pure. Adding a mode is its own package plus one line here (and its row of facts in
kpemu.model.modes, which validation reads without importing kpemu.proxy). A mode that traces or
holds its state in a new way (`trace`, `walks`) also needs an entry in each table keyed by them:
kpemu.kernel.tracers.TRACERS, kpemu.analyse.explain.EXPLAINERS, kpemu.analyse.oracle.WALKERS and
kpemu.dumps.registry.DUMPS (tests/unit/test_observation_tables.py names any that is missing).
"""

from __future__ import annotations

from kpemu.errors import InputError
from kpemu.model.topology import Topology
from kpemu.proxy import iptables, ipvs, nftables
from kpemu.proxy.proxymode import ProxyMode
from kpemu.proxy.state import NodeProxyState, ProxyState
from kpemu.proxy.view import as_seen

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


def proxy_state(topo: Topology, kernel: tuple[int, int] | None = None) -> ProxyState:
    """Every node's kube-proxy state, generated once (for `kernel`; None: any kernel kube-proxy treats
    as current)."""
    m, seen = mode_of(topo), as_seen(topo)
    return ProxyState(m.name, kernel, {n.name: m.build(seen, n.name, kernel) for n in topo.nodes})


def node_state(topo: Topology, node: str) -> NodeProxyState:
    """One node's kube-proxy state, for any kernel kube-proxy treats as current (outside a run: `kpemu rules`,
    `kpemu trace`, `kpemu check-node`)."""
    return mode_of(topo).build(as_seen(topo), node, None)


def node_texts(topo: Topology, node: str, state: NodeProxyState) -> dict[str, str]:
    """Every `kpemu rules` format for `node` from its `state`; formats of other modes say this mode has no
    such state."""
    m = mode_of(topo)
    texts = state.texts
    none = f"# kube-proxy mode {m.name}: node {node} has no {{}} state\n"
    return {f: texts.get(f, none.format(f)) for f in ALL_FORMATS}
