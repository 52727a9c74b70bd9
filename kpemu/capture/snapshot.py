"""Reading kernel state back from the lab (effects): rules per node, conntrack, IPVS connections."""

from __future__ import annotations

from pathlib import Path

from kpemu.kernel import netns as nsmod
from kpemu.pace import scaled

SAVE = {"nft": "iptables-nft-save", "legacy": "iptables-legacy-save"}


def _out(ns: str, argv: list[str]) -> str:
    return nsmod.output_in(ns, argv, timeout=scaled(5.0))


RULE_KINDS = {"iptables": "iptables-save", "ipset": "ipset", "ipvs": "ipvs"}  # kind -> file suffix


def rules_text(ns: str, kind: str, backend: str) -> str:
    """What the kernel holds in `ns`: `iptables-save`, `ipset save` or `ipvsadm -Sn` text."""
    argv = {"iptables": [SAVE.get(backend, "iptables-save")], "ipset": ["ipset", "save"],
            "ipvs": ["ipvsadm", "-Sn"]}[kind]
    return _out(ns, argv)


def save_rules(nodes: dict[str, str], backend: str, ipvs: bool, rules_dir: Path) -> None:
    """rules/<node>.iptables-save, .ipset and (IPVS mode) .ipvs, as the kernel reports them."""
    rules_dir.mkdir(parents=True, exist_ok=True)
    for node, ns in nodes.items():
        for kind, suffix in RULE_KINDS.items():
            if kind != "ipvs" or ipvs:
                (rules_dir / f"{node}.{suffix}").write_text(rules_text(ns, kind, backend))


def conntrack_text(ns: str) -> str:
    """`conntrack -L` inside `ns` (empty when the table is empty)."""
    return _out(ns, ["conntrack", "-L"])


def ipvs_connections_text(ns: str) -> str:
    """`ipvsadm -Lnc` inside `ns`: the IPVS connection table."""
    return _out(ns, ["ipvsadm", "-Lnc"])
