"""`kpemu rules`: the state kube-proxy would program on one node, as text.

Formats: iptables-restore (the restore input kpemu applies), iptables-save (canonical
`iptables-save` text of kube-proxy's and kubelet's chains), ipset (`ipset save`), ipvs
(`ipvsadm -Sn`), all (each of them under a `# ---` heading). In iptables mode the ipset and ipvs
formats contain a single comment line; in IPVS mode everything comes from kpemu.proxy.ipvs.
"""

from __future__ import annotations

from kpemu.errors import InputError
from kpemu.model.topology import Topology
from kpemu.proxy.save import ruleset_from_restore, save_text

FORMATS = ("iptables-restore", "iptables-save", "ipset", "ipvs", "all")


def _check(topo: Topology, node: str, fmt: str) -> None:
    names = [n.name for n in topo.nodes]
    if node not in names:
        raise InputError(f"--node {node!r} is not a node of topology {topo.name!r}; valid nodes: {', '.join(names)}")
    if fmt not in FORMATS:
        raise InputError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")


def _texts(topo: Topology, node: str) -> dict[str, str]:
    backend = topo.kubeProxy.backend
    if topo.kubeProxy.mode == "ipvs":
        from kpemu.proxy.ipvs import ipvs_rules  # written in parallel; imported lazily

        st = ipvs_rules(topo, node)
        restore = st.restore_text()
        return {
            "iptables-restore": restore,
            "iptables-save": save_text(ruleset_from_restore(restore), backend),
            "ipset": st.ipset_save_text(),
            "ipvs": st.ipvsadm_text(),
        }
    from kpemu.proxy.iptables import iptables_rules, restore_text

    rs = iptables_rules(topo, node)
    none = f"# kube-proxy mode iptables: node {node} has no {{}} state\n"
    return {
        "iptables-restore": restore_text(rs),
        "iptables-save": save_text(rs, backend),
        "ipset": none.format("ipset"),
        "ipvs": none.format("IPVS"),
    }


def render_rules(topo: Topology, node: str, fmt: str) -> str:
    """The text of `fmt` for `node`; InputError names --node / --format when they are wrong."""
    _check(topo, node, fmt)
    texts = _texts(topo, node)
    if fmt != "all":
        return texts[fmt]
    return "".join(f"# --- {name} ---\n{texts[name]}" for name in FORMATS[:-1])
