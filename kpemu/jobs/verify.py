"""Check what the kernel read back against what the job expected (pure): iptables, ipsets, IPVS.

The executor saves each node's `iptables-save`, `ipset save` and `ipvsadm -Sn` right after the
lab is built (rules/<node>.*); a difference fails the run naming the node and the first
differing line, as a deploy does.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from kpemu.errors import ApplyError
from kpemu.jobs.schema import Readback
from kpemu.kernel.netfilter import owned_lines
from kpemu.kernel.readback import first_difference
from kpemu.kernel.snapshot import RULE_KINDS
from kpemu.proxy.ipvs import ipset_text, ipvsadm_text
from kpemu.proxy.nftables.listing import without_interval_order


def _iptables(item: Readback, text: str) -> list[tuple[str, str, str]]:
    chains = {t: set(c) for t, c in item.chains.items()}
    exp, got = owned_lines(item.expected, chains), owned_lines(text, chains)
    return [(f"iptables-save -t {t}", "\n".join(exp.get(t, [])), "\n".join(got.get(t, [])))
            for t in sorted(set(exp) | set(got))]


def _ipset(item: Readback, text: str) -> list[tuple[str, str, str]]:
    names = set(item.sets)
    lines = [ln for ln in text.splitlines() if len(ln.split()) > 1 and ln.split()[1] in names]
    return [("ipset save", item.expected, ipset_text.canonical_save("\n".join(lines)))]


def _ipvs(item: Readback, text: str) -> list[tuple[str, str, str]]:
    return [("ipvsadm -Sn", item.expected, ipvsadm_text.canonical_ipvsadm(text))]


def _nft(item: Readback, text: str) -> list[tuple[str, str, str]]:
    # interval-set elements are listed in the kernel's own order: compared as a set
    return [("nft list table ip kube-proxy", without_interval_order(item.expected), without_interval_order(text))]


COMPARE: dict[str, Callable[[Readback, str], list[tuple[str, str, str]]]] = {
    "iptables": _iptables, "ipset": _ipset, "ipvs": _ipvs, "nft": _nft}


def readback_problems(expected: Sequence[Readback], read: Callable[[str, str], str]) -> list[str]:
    """One line per differing part: `<node>: <tool> read back differs from the plan: line N: ...`.

    `read(node, kind)` returns what the kernel showed for that node and kind.
    """
    out = []
    for item in expected:
        for what, exp, got in COMPARE[item.kind](item, read(item.node, item.kind)):
            diff = first_difference(exp, got)
            if diff is not None:
                out.append(f"{item.node}: {what} read back differs from the plan: {diff}")
    return out


def check_saved_rules(expected: Sequence[Readback], rules_dir: Path) -> None:
    """ApplyError with every difference between rules/<node>.* and the job's expectations."""

    def read(node: str, kind: str) -> str:
        path = rules_dir / f"{node}.{RULE_KINDS[kind]}"
        return path.read_text() if path.exists() else ""

    problems = readback_problems(expected, read)
    if problems:
        raise ApplyError("\n".join(problems))
