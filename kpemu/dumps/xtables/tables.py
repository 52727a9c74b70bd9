"""Which table each line of an `iptables -S` output or a grep'ped fragment (no `*table` line) is in
(pure): told by `--table`, by a group's `-P` policies (the built-in chains a table has), or by the
names of the rule's chain and target where only one table can hold them, and from there along the
jumps (a chain and the chains it jumps to are in one table). A line no evidence reaches is an
error naming it and the fix (`--table`), never a guess.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kpemu.errors import InputError, Problem

TABLE_NAMES = ("raw", "mangle", "nat", "filter", "security")
# the built-in chains each table has, which `iptables -t T -S` prints as -P lines
POLICIES = {
    frozenset(("PREROUTING", "OUTPUT")): "raw",
    frozenset(("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING")): "mangle",
    frozenset(("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING")): "nat",
    frozenset(("INPUT", "FORWARD", "OUTPUT")): "filter",
}
# targets only one table takes (iptables-extensions(8): DNAT/SNAT/MASQUERADE/REDIRECT "only valid in the
# nat table"; nat refuses DROP and REJECT, NOTRACK and CT are raw's)
_TARGET_TABLE = {"DNAT": "nat", "SNAT": "nat", "MASQUERADE": "nat", "REDIRECT": "nat", "NETMAP": "nat",
                 "REJECT": "filter", "DROP": "filter", "NOTRACK": "raw", "CT": "raw"}
# chains of kube-proxy, docker and flannel that exist in one table only
_CHAIN_TABLE = (
    (re.compile(r"KUBE-(SVC|SVL|SEP|EXT|FW|XLB)-[A-Z0-9]+"), "nat"),
    (re.compile(r"KUBE-(MARK-MASQ|POSTROUTING|LOAD-BALANCER|NODE-PORT|KUBELET-CANARY)"), "nat"),
    (re.compile(r"PREROUTING|POSTROUTING|FLANNEL-POSTRTG|CNI-[0-9a-f]{24}|CNI-HOSTPORT-\S+"), "nat"),
    (re.compile(r"FORWARD|KUBE-(FORWARD|FIREWALL|PROXY-FIREWALL|EXTERNAL-SERVICES|IPVS-FILTER|IPVS-OUT-FILTER|"
                r"SOURCE-RANGES-FIREWALL|NODE-PORT-FILTER)"), "filter"),
    (re.compile(r"DOCKER-(USER|ISOLATION-STAGE-[12])|FLANNEL-FWD|CNI-FORWARD|CNI-ADMIN"), "filter"),
)


@dataclass(frozen=True)
class Placed:
    """One -A line of a dump without *table lines: its number, chain, target, and the table it is in."""

    line: int
    chain: str
    target: str | None
    table: str


def chain_table(chain: str) -> str | None:
    """The one table a chain of this name can be in, or None."""
    return next((t for rx, t in _CHAIN_TABLE if rx.fullmatch(chain)), None)


def _target(tokens: list[str]) -> str | None:
    for i, tok in enumerate(tokens[:-1]):
        if tok in ("-j", "--jump", "-g", "--goto"):
            return tokens[i + 1]
    return None


def place(rules: list[tuple[int, str, list[str]]], path: str, told: str | None) -> tuple[list[Placed], dict[str, str]]:
    """The table of each rule `(line, chain, tokens after the chain)` and, per table, what told it
    (for the trace's header). `told`: the table given by --table."""
    if told is not None:
        return [Placed(n, c, _target(t), told) for n, c, t in rules], {told: "given by --table"}
    table: dict[int, str] = {}
    why: dict[str, str] = {}
    of_chain: dict[str, set[str]] = {}

    def decide(n: int, chain: str, t: str, reason: str) -> None:
        table[n] = t
        why.setdefault(t, reason)
        of_chain.setdefault(chain, set()).add(t)

    for n, chain, toks in rules:
        target = _target(toks)
        if target in _TARGET_TABLE:
            decide(n, chain, _TARGET_TABLE[target], f"line {n}: -j {target} is only valid there")
        elif (t := chain_table(chain)) is not None:
            decide(n, chain, t, f"line {n}: chain {chain} is only in that table")
        elif target is not None and (t := chain_table(target)) is not None:
            decide(n, chain, t, f"line {n}: chain {target} is only in that table")
    changed = True
    while changed:  # a chain and the user chains it jumps to are in one table
        changed = False
        for n, chain, toks in rules:
            if n in table:
                target = _target(toks)
                if target and target not in _TARGET_TABLE and not of_chain.get(target):
                    of_chain[target] = {table[n]}
                    changed = True
                continue
            target = _target(toks)
            for c in (chain, target):
                got = of_chain.get(c or "", set())
                if len(got) == 1:
                    decide(n, chain, next(iter(got)), f"line {n}: chain {c} is in that table")
                    changed = True
                    break
    tables = set(table.values())
    out = []
    for n, chain, toks in rules:
        t = table.get(n)
        if t is None and len(tables) == 1:
            t = next(iter(tables))
        if t is None:
            which = " or ".join(sorted(tables)) if tables else "which table"
            raise InputError([Problem(path, f"line {n}", f"-A {chain[:40]}: cannot tell {which} this rule is in (no "
                                      "*table line, no -P policies, no chain or target only one table has); give "
                                      "--table nat (or filter, mangle, raw), or paste the dump with its *table lines")])
        out.append(Placed(n, chain, _target(toks), t))
    return out, why
