"""Model versus the real kube-proxy (pure): what the real one programmed on each node, read back from the
kernel (rules/<node>.*), against what kpemu's model generates for the same objects (the job's read-back
expectations, kpemu.jobs.verify), part by part, every difference as a unified diff.

iptables compares kube-proxy's chains of both sides (the model's, and every KUBE- chain the real one
declared: a chain the model lacks is a difference too); nftables compares the `ip kube-proxy` table's
objects (sets, maps, chains) as a set, since the real process lists them in the order its syncs
created them where the model writes one full sync.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kpemu.jobs.schema import Readback
from kpemu.jobs.verify import COMPARE
from kpemu.kernel.netfilter import owned_lines
from kpemu.proxy.nftables.listing import without_interval_order

DIFF_LINES = 60  # lines of one part's diff kept in the report (the files hold the whole of both sides)
_KUBE_CHAIN = re.compile(r"^:(KUBE-\S+)", re.M)


@dataclass(frozen=True)
class Difference:
    """One part of one node where model and real differ: `what` (the tool and table), the diff lines."""

    node: str
    what: str
    diff: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"node": self.node, "what": self.what, "diff": list(self.diff)}


def _iptables(item: Readback, text: str) -> list[tuple[str, str, str]]:
    chains = {t: set(c) for t, c in item.chains.items()}
    table = ""
    for line in text.splitlines():  # every KUBE- chain the real kube-proxy declared, per table
        if line.startswith("*"):
            table = line[1:].strip()
        elif m := _KUBE_CHAIN.match(line):
            chains.setdefault(table, set()).add(m[1])
    exp, got = owned_lines(item.expected, chains), owned_lines(text, chains)
    return [(f"iptables-save -t {t}", "\n".join(by_service(t, exp.get(t, []))),
             "\n".join(by_service(t, got.get(t, [])))) for t in sorted(set(exp) | set(got))]


# The chains kube-proxy fills walking its service ports in Go map order: their rules are compared sorted
# by service port, each one's rules in their order (as upstream's sortIPTablesRules, proxier_test.go, sorts
# by service).
_BY_SERVICE = {("filter", "KUBE-NODEPORTS"), ("nat", "KUBE-NODEPORTS"), ("filter", "KUBE-SERVICES"),
               ("nat", "KUBE-SERVICES"), ("filter", "KUBE-EXTERNAL-SERVICES"), ("filter", "KUBE-PROXY-FIREWALL")}
_COMMENT = re.compile(r'--comment (?:"([^"]*)"|(\S+))')


def by_service(table: str, lines: list[str]) -> list[str]:
    """`lines` (one table's) with the rules of each _BY_SERVICE chain sorted by the service their comment
    names (stable; a rule without one, and nat KUBE-SERVICES' "must be the last rule", keep their place)."""
    out = list(lines)
    for chain in {c for t, c in _BY_SERVICE if t == table}:
        slots = []
        for i, line in enumerate(out):
            m = _COMMENT.search(line) if line.startswith(f"-A {chain} ") else None
            if m and "must be the last rule" not in line:
                slots.append((i, (m[1] or m[2]).split(" ", 1)[0]))  # the service port: its ports' order is a map's too
        ordered = sorted(slots, key=lambda s: s[1])
        moved = [out[i] for i, _ in ordered]
        for (i, _), line in zip(slots, moved, strict=True):
            out[i] = line
    return out


def nft_objects(listing: str) -> dict[str, str]:
    """A `nft list table` listing's objects by their heading (`\\tchain NAME {`), each its whole text."""
    out: dict[str, str] = {}
    head = ""
    for line in without_interval_order(listing).splitlines():
        if line.startswith("\t") and not line.startswith("\t\t") and line.endswith("{"):
            head = line.strip()
            out[head] = ""
        elif head:
            if line == "\t}":
                head = ""
            else:
                out[head] += line.strip() + "\n"
    return out


def _nft(item: Readback, text: str) -> list[tuple[str, str, str]]:
    exp, got = nft_objects(item.expected), nft_objects(text)
    return [(f"nft list table ip kube-proxy: {head}", exp.get(head, ""), got.get(head, ""))
            for head in sorted(set(exp) | set(got)) if exp.get(head) != got.get(head)]


PARTS: dict[str, Callable[[Readback, str], list[tuple[str, str, str]]]] = {
    **COMPARE, "iptables": _iptables, "nft": _nft}


def differences(expected: Sequence[Readback], read: Callable[[str, str], str]) -> list[Difference]:
    """Every part where the kernel (`read(node, kind)`) holds other than the model's expectation."""
    out = []
    for item in expected:
        for what, exp, got in PARTS[item.kind](item, read(item.node, item.kind)):
            if exp.strip() == got.strip():
                continue
            lines = list(difflib.unified_diff(exp.splitlines(), got.splitlines(), "model", "real", lineterm="", n=1))
            kept = lines[:DIFF_LINES] + ([f"... {len(lines) - DIFF_LINES} more lines"] if len(lines) > DIFF_LINES
                                         else [])
            out.append(Difference(item.node, what, tuple(kept)))
    return out
