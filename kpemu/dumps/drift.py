"""`kpemu check-node`: a node's real dumps against what kube-proxy would program there.

Only kube-proxy's (and kubelet's) state is compared: the KUBE-* chains, the jumps from the
built-in chains into them, and in IPVS mode the ipsets and virtual servers; a CNI's or docker's
own rules are not kube-proxy drift. Rules are compared in iptables-save's canonical form, chain by
chain and in order; every difference is put under the Service it belongs to (from the rule's
comment, or the Service whose rules jump to the chain), so stale endpoints (KUBE-SEP chains of
endpoints the EndpointSlices no longer have) and rules of deleted Services stand out.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from kpemu.proxy.rules import BUILTIN_CHAINS, RuleSet
from kpemu.proxy.save import canonical_line

NODE_WIDE = ""  # the group of rules that belong to no single Service
_SERVICE_COMMENT = re.compile(r"^([a-z0-9][-a-z0-9.]*)/([a-z0-9][-a-z0-9.]*):")
_PER_SERVICE = ("KUBE-SVC-", "KUBE-SEP-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-XLB-")


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

    def group(self, key: str) -> ServiceDrift:
        """The differences of Service `key` (NODE_WIDE: of no single Service)."""
        if key not in self.groups:
            self.groups[key] = ServiceDrift(key, key == NODE_WIDE or key in self.services)
        return self.groups[key]

    @property
    def equal(self) -> bool:
        return all(g.empty for g in self.groups.values())


def _service_key(comment: str | None) -> str | None:
    m = _SERVICE_COMMENT.match(comment or "")
    return f"{m.group(1)}/{m.group(2)}" if m else None


def _owners(rs: RuleSet) -> dict[tuple[str, str], str]:
    """(table, chain) -> Service key, for the per-Service chains: from the comments of the rules in
    them or of the rules that jump to them (kube-proxy 1.14's KUBE-SEP rules carry no comment)."""
    owners: dict[tuple[str, str], str] = {}
    changed = True
    while changed:
        changed = False
        for tname, table in rs.tables.items():
            for cname, chain in table.chains.items():
                for r in chain.rules:
                    key = _service_key(r.parsed.comment)
                    if key is None and cname.startswith(_PER_SERVICE):
                        key = owners.get((tname, cname))
                    if key is None:
                        continue
                    for target in ([cname] if cname.startswith(_PER_SERVICE) else []) + [r.target or ""]:
                        if target.startswith(_PER_SERVICE) and (tname, target) not in owners:
                            owners[(tname, target)] = key
                            changed = True
    return owners


def kube_lines(rs: RuleSet) -> dict[tuple[str, str], list[str]]:
    """kube-proxy's and kubelet's rules in canonical form per (table, chain): every rule of a KUBE-*
    chain, and the rules of the built-in chains that jump to one."""
    out: dict[tuple[str, str], list[str]] = {}
    for tname, table in rs.tables.items():
        for cname, chain in table.chains.items():
            builtin = cname in BUILTIN_CHAINS.get(tname, ())
            if not builtin and not cname.startswith("KUBE-"):
                continue
            lines = [canonical_line(r) for r in chain.rules if not builtin or (r.target or "").startswith("KUBE-")]
            if lines:
                out[(tname, cname)] = lines
    return out


def _group_of(line: str, chain: tuple[str, str], owners: dict[tuple[str, str], str]) -> str:
    m = re.search(r'--comment "([^"]*)"', line) or re.search(r"--comment (\S+)", line)
    return _service_key(m.group(1) if m else None) or owners.get(chain, NODE_WIDE)


def _dnat(lines: list[str]) -> str:
    for line in lines:
        m = re.search(r"--to-destination (\S+)", line)
        if m:
            return m.group(1)
    return "?"


def compare_rules(drift: Drift, expected: RuleSet, dump: RuleSet) -> None:
    """Add the rule differences between kube-proxy's rules and a dump to `drift`, per Service."""
    want, have = kube_lines(expected), kube_lines(dump)
    owners = {**_owners(dump), **_owners(expected)}
    drift.rules_compared += sum(len(v) for v in have.values())
    group = drift.group

    order = list(want) + [c for c in have if c not in want]
    for chain in order:
        exp, got = want.get(chain, []), have.get(chain, [])
        name = f"{chain[0]}/{chain[1]}"
        if exp == got:
            continue
        if chain[1].startswith("KUBE-SEP-") and (not exp or not got):
            g = group(owners.get(chain, NODE_WIDE))
            (g.missing_endpoints if exp else g.stale_endpoints).append((_dnat(exp or got), name))
        diff_lines(exp, got, name, lambda line, c=chain: group(_group_of(line, c, owners)))


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
    head = f"node {d.node}: {d.proxy}; compared {', '.join(d.compared)}"
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


def _service_index(topo: Any) -> dict[tuple[str, int, str], str]:
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


def _member_service(member: str, index: dict[tuple[str, int, str], str]) -> str:
    parts = member.split(",")
    if len(parts) == 1 and parts[0].isdigit():
        return next((k for (a, port, _), k in index.items() if a == "*" and port == int(parts[0])), NODE_WIDE)
    if len(parts) >= 2 and ":" in parts[1]:
        proto, _, port = parts[1].partition(":")
        if port.isdigit():
            return index.get((parts[0], int(port), proto)) or index.get(("*", int(port), proto), NODE_WIDE)
    return NODE_WIDE


def compare_ipsets(drift: Drift, expected: dict[str, tuple[str, tuple[str, ...]]],
                   dump: dict[str, tuple[str, tuple[str, ...]]], index: dict[tuple[str, int, str], str]) -> None:
    """Members of kube-proxy's sets (KUBE-*) that are missing from, or extra in, `ipset save`."""
    for name in sorted({n for n in (*expected, *dump) if n.startswith("KUBE-")}):
        want = set(expected.get(name, ("", ()))[1])
        have = set(dump.get(name, ("", ()))[1])
        drift.rules_compared += len(have)
        for m in sorted(want - have):
            drift.group(_member_service(m, index)).missing.append(f"ipset {name}: {m}")
        for m in sorted(have - want):
            drift.group(_member_service(m, index)).extra.append(f"ipset {name}: {m}")


def compare_virtual_servers(drift: Drift, expected: tuple, dump: list, index: dict[tuple[str, int, str], str]) -> None:
    """IPVS virtual servers and their real servers against `ipvsadm -Sn`."""
    from kpemu.proxy.ipvs.ipvsadm_text import service_line

    def key_of(vs: Any) -> str:
        proto = vs.protocol.lower()
        return index.get((vs.address, vs.port, proto)) or index.get(("*", vs.port, proto), NODE_WIDE)

    want = {vs.name: vs for vs in expected}
    have = {vs.name: vs for vs in dump}
    drift.rules_compared += len(have)
    for name in [*want, *(n for n in have if n not in want)]:
        w, h = want.get(name), have.get(name)
        vs = w or h
        g = drift.group(key_of(vs))
        if h is None:
            g.missing.append(f"ipvs: {service_line(w)}")
            continue
        if w is None:
            g.extra.append(f"ipvs: {service_line(h)}")
            g.stale_endpoints += [(f"{r.address}:{r.port}", f"ipvs {name}") for r in h.real_servers]
            continue
        if service_line(w) != service_line(h):
            g.changed.append(([f"ipvs: {service_line(w)}"], [f"ipvs: {service_line(h)}"]))
        wr = {f"{r.address}:{r.port}" for r in w.real_servers}
        hr = {f"{r.address}:{r.port}" for r in h.real_servers}
        g.stale_endpoints += [(ep, f"ipvs {name}") for ep in sorted(hr - wr)]
        g.missing_endpoints += [(ep, f"ipvs {name}") for ep in sorted(wr - hr)]


def check_node(topo: Any, node: str, iptables_save: RuleSet | None = None,
               ipvs: list | None = None, ipsets: dict[str, tuple[str, tuple[str, ...]]] | None = None,
               compared: list[str] | None = None) -> Drift:
    """Compare the given dumps of `node` with what kube-proxy would program from `topo`."""
    from kpemu.proxy.modes import node_state

    kp = topo.kubeProxy
    drift = Drift(node, f"kube-proxy {kp.version} {kp.mode} mode", compared or [], {s.key for s in topo.services})
    index = _service_index(topo)
    walk = node_state(topo, node).walk
    if walk.ipvs is not None:
        if ipsets is not None:
            compare_ipsets(drift, dict(walk.ipvs.sets), ipsets, index)
        if ipvs is not None:
            compare_virtual_servers(drift, walk.ipvs.virtual_servers, ipvs, index)
    if iptables_save is not None:  # a mode without iptables rules (nftables) expects none
        compare_rules(drift, walk.rules or RuleSet(), iptables_save)
    return drift
