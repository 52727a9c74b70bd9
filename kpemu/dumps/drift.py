"""What differs between a node's real dumps and what kube-proxy would program there, whichever kind
of state the mode holds (pure): the differences grouped per Service, how they are told to humans
and to scripts, and the lookups from a rule or element to its Service that both kinds share
(kpemu.dumps.xtables.drift, kpemu.dumps.nft.drift)."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kpemu.model.topology import Topology


NODE_WIDE = ""  # the group of rules that belong to no single Service


_SERVICE_COMMENT = re.compile(r"^([a-z0-9][-a-z0-9.]*)/([a-z0-9][-a-z0-9.]*):")


@dataclass
class ServiceDrift:
    """The differences of one Service (or of the node-wide rules, key NODE_WIDE)."""

    key: str
    exists: bool = True
    missing: list[str] = field(default_factory=list)  # "table/chain: -A ..." kube-proxy would add
    extra: list[str] = field(default_factory=list)  # in the dump, not programmed by kube-proxy
    changed: list[tuple[list[str], list[str]]] = field(default_factory=list)  # (expected, dump)
    stale_endpoints: list[tuple[str, str]] = field(default_factory=list)  # (endpoint, chain) only in the dump
    missing_endpoints: list[tuple[str, str]] = field(default_factory=list)  # (endpoint, chain) not in the dump

    @property
    def empty(self) -> bool:
        return not (self.missing or self.extra or self.changed or self.stale_endpoints or self.missing_endpoints)


@dataclass
class Drift:
    """Everything that differs on one node; `compared` names the dumps that were read."""

    node: str
    proxy: str  # "kube-proxy 1.14 iptables mode"
    compared: list[str]
    services: set[str]  # the Services that exist (namespace/name)
    rules_compared: int = 0
    compared_what: str = "kube-proxy rules"  # what rules_compared counts
    groups: dict[str, ServiceDrift] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # how the comparison was made where a dump's form limits it

    def group(self, key: str) -> ServiceDrift:
        """The differences of Service `key` (NODE_WIDE: of no single Service)."""
        if key not in self.groups:
            self.groups[key] = ServiceDrift(key, key == NODE_WIDE or key in self.services)
        return self.groups[key]

    @property
    def equal(self) -> bool:
        return all(g.empty for g in self.groups.values())


def service_key(comment: str | None) -> str | None:
    """The Service (`namespace/name`) a kube-proxy comment (`ns/svc:port ...`) names, else None."""
    m = _SERVICE_COMMENT.match(comment or "")
    return f"{m.group(1)}/{m.group(2)}" if m else None


def diff_lines(exp: list[str], got: list[str], label: str, group_of: Callable[[str], ServiceDrift]) -> None:
    """Put the differences of two line lists in order (difflib), each prefixed with `label`, into the
    group `group_of(line)` names: changed runs, missing lines, extra lines."""
    sm = difflib.SequenceMatcher(a=exp, b=got, autojunk=False)
    for op, i1, i2, j1, j2 in sm.get_opcodes():
        if op == "replace":
            group_of(exp[i1]).changed.append(([f"{label}: {x}" for x in exp[i1:i2]],
                                              [f"{label}: {x}" for x in got[j1:j2]]))
        for line in exp[i1:i2] if op == "delete" else []:
            group_of(line).missing.append(f"{label}: {line}")
        for line in got[j1:j2] if op == "insert" else []:
            group_of(line).extra.append(f"{label}: {line}")


def render_drift(d: Drift) -> str:
    """The report for humans."""
    head = "\n".join([f"node {d.node}: {d.proxy}; compared {', '.join(d.compared)}",
                      *(f"note: {n}" for n in d.notes)])
    bad = [g for g in d.groups.values() if not g.empty]
    if not bad:
        return f"{head}\nno drift: the {d.rules_compared} {d.compared_what} equal what kube-proxy would program\n"
    out = [head, f"drift in {len(bad)} group{'s' if len(bad) != 1 else ''}:"]
    for g in sorted(bad, key=lambda g: (g.key == NODE_WIDE, g.key)):
        title = "node-wide rules (no single Service)" if g.key == NODE_WIDE else f"Service {g.key}"
        if not g.exists:
            title += ": the Service no longer exists, its rules remain"
        out.append(title)
        out += [f"  stale endpoint {ep}: {chain} is in the dump, but not among the Service's endpoints"
                for ep, chain in g.stale_endpoints]
        out += [f"  missing endpoint {ep}: {chain} is not in the dump" for ep, chain in g.missing_endpoints]
        out += [f"  missing  {line}" for line in g.missing]
        out += [f"  extra    {line}" for line in g.extra]
        for exp, got in g.changed:
            out.append("  changed")
            out += [f"    kube-proxy  {line}" for line in exp]
            out += [f"    dump        {line}" for line in got]
    return "\n".join(out) + "\n"


def drift_json(d: Drift) -> dict[str, Any]:
    """The report for scripts (`-o json`)."""
    return {
        "node": d.node,
        "proxy": d.proxy,
        "compared": d.compared,
        "equal": d.equal,
        "notes": d.notes,
        "groups": [
            {
                "service": g.key or None,
                "serviceExists": g.exists,
                "staleEndpoints": [{"endpoint": e, "chain": c} for e, c in g.stale_endpoints],
                "missingEndpoints": [{"endpoint": e, "chain": c} for e, c in g.missing_endpoints],
                "missing": g.missing,
                "extra": g.extra,
                "changed": [{"kubeProxy": e, "dump": h} for e, h in g.changed],
            }
            for g in d.groups.values() if not g.empty
        ],
    }


def service_index(topo: Topology) -> dict[tuple[str, int, str], str]:
    """(address or "*" for a nodePort, port, protocol) -> Service key."""
    out: dict[tuple[str, int, str], str] = {}
    for s in topo.services:
        for p in s.ports:
            proto = p.protocol.lower()
            for addr in (s.clusterIP, *s.externalIPs, *s.loadBalancerIPs):
                out[(addr, p.port, proto)] = s.key
            if p.nodePort:
                out[("*", p.nodePort, proto)] = s.key
    return out
