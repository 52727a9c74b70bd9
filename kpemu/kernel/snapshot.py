"""Reading kernel state back from a lab's namespaces (effects): the rules each node holds, per-rule
packet counters, and the conntrack and IPVS connection tables.

Counters are `iptables-save -c` and, in IPVS mode, `ipvsadm -Ln --stats`; the deltas between two
snapshots are computed by the pure kpemu.analyse.attribution.xtables.counter_deltas / ipvs_decisions.
Every read runs in parallel over the nodes (seconds each in an emulated guest).
"""

from __future__ import annotations

from pathlib import Path

from kpemu.kernel import netns as nsmod
from kpemu.pace import scaled
from kpemu.plan.tracing import CounterSnapshot
from kpemu.proxy.xtables import SAVE

RULE_KINDS = {"iptables": "iptables-save", "ipset": "ipset", "ipvs": "ipvs", "nft": "nft"}  # kind -> file suffix


def _rules_argv(kind: str, backend: str) -> list[str]:
    return {"iptables": [SAVE.get(backend, "iptables-save")], "ipset": ["ipset", "save"],
            "ipvs": ["ipvsadm", "-Sn"], "nft": ["nft", "list", "table", "ip", "kube-proxy"]}[kind]


def rules_text(ns: str, kind: str, backend: str) -> str:
    """What the kernel holds in `ns`: `iptables-save`, `ipset save`, `ipvsadm -Sn` or (nftables mode)
    `nft list table ip kube-proxy` text."""
    return nsmod.output_in(ns, _rules_argv(kind, backend), timeout=scaled(5.0))


def save_rules(nodes: dict[str, str], backend: str, kinds: list[str], rules_dir: Path) -> None:
    """rules/<node>.<suffix> for each of `kinds` (RULE_KINDS: iptables-save, ipset, ipvs, nft), as the kernel
    reports them."""
    rules_dir.mkdir(parents=True, exist_ok=True)
    files = [(node, ns, kind, RULE_KINDS[kind]) for node, ns in nodes.items() for kind in kinds]
    texts = nsmod.outputs_in([(ns, _rules_argv(kind, backend)) for _, ns, kind, _ in files], scaled(5.0))
    for (node, _, _, suffix), text in zip(files, texts, strict=True):
        (rules_dir / f"{node}.{suffix}").write_text(text)


def read_counters(nodes: dict[str, str], backend: str = "nft", ipvs: bool = False) -> CounterSnapshot:
    """Read every node's counters once."""
    cmds = [(ns, [SAVE.get(backend, "iptables-save"), "-c"]) for ns in nodes.values()]
    if ipvs:
        cmds += [(ns, ["ipvsadm", "-Ln", "--stats"]) for ns in nodes.values()]
    texts = nsmod.outputs_in(cmds, timeout=scaled(10.0))
    return CounterSnapshot(iptables=dict(zip(nodes, texts, strict=False)),
                           ipvs_stats=dict(zip(nodes, texts[len(nodes):], strict=False)) if ipvs else {})


def connection_tables(nat_members: dict[str, str], nodes: dict[str, str], ipvs: bool,
                      ) -> tuple[dict[str, str], dict[str, str]]:
    """`conntrack -L` of every NAT member and (IPVS mode) `ipvsadm -Lnc` of every node, in parallel."""
    cmds = [(ns, ["conntrack", "-L"]) for ns in nat_members.values()]
    if ipvs:
        cmds += [(ns, ["ipvsadm", "-Lnc"]) for ns in nodes.values()]
    texts = nsmod.outputs_in(cmds, scaled(5.0))
    conntrack = dict(zip(nat_members, texts, strict=False))
    return conntrack, dict(zip(nodes, texts[len(nat_members):], strict=False)) if ipvs else {}
