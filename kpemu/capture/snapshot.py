"""Reading kernel state back from the lab (effects): rules per node, conntrack, IPVS connections."""

from __future__ import annotations

from pathlib import Path

from kpemu.kernel import netns as nsmod
from kpemu.pace import scaled

SAVE = {"nft": "iptables-nft-save", "legacy": "iptables-legacy-save"}


def _out(ns: str, argv: list[str]) -> str:
    return nsmod.output_in(ns, argv, timeout=scaled(5.0))


def save_rules(nodes: dict[str, str], backend: str, ipvs: bool, rules_dir: Path) -> None:
    """rules/<node>.iptables-save, .ipset, (IPVS mode) .ipvs and (nftables mode) .nft, as the kernel reports them."""
    rules_dir.mkdir(parents=True, exist_ok=True)
    for node, ns in nodes.items():
        (rules_dir / f"{node}.iptables-save").write_text(_out(ns, [SAVE.get(backend, "iptables-save")]))
        (rules_dir / f"{node}.ipset").write_text(_out(ns, ["ipset", "save"]))
        if ipvs:
            (rules_dir / f"{node}.ipvs").write_text(_out(ns, ["ipvsadm", "-Sn"]))
        nft = _out(ns, ["nft", "list", "table", "ip", "kube-proxy"])
        if not nft.startswith("# "):  # nftables mode: kube-proxy's table as the kernel lists it
            (rules_dir / f"{node}.nft").write_text(nft)


def conntrack_text(ns: str) -> str:
    """`conntrack -L` inside `ns` (empty when the table is empty)."""
    return _out(ns, ["conntrack", "-L"])


def ipvs_connections_text(ns: str) -> str:
    """`ipvsadm -Lnc` inside `ns`: the IPVS connection table."""
    return _out(ns, ["ipvsadm", "-Lnc"])
