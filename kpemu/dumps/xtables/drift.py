"""`kpemu check-node` for a node of iptables or IPVS mode: its real dumps against what kube-proxy would program there.

Only kube-proxy's (and kubelet's) state is compared: the KUBE-* chains, the jumps from the
built-in chains into them, and in IPVS mode the ipsets and virtual servers; a CNI's or docker's
own rules are not kube-proxy drift. Rules are compared in iptables-save's canonical form, chain by
chain and in order, except where kube-proxy's order is not defined (`MAP_ORDERED`: there the rules
are compared Service port by Service port, each one's own rules in order); every difference is put
under the Service it belongs to (from the rule's comment, or the Service whose rules jump to the
chain), so stale endpoints (KUBE-SEP chains of endpoints the EndpointSlices no longer have) and rules
of deleted Services stand out.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Any

from kpemu.dumps.drift import NODE_WIDE, Drift, diff_lines, service_index, service_key
from kpemu.dumps.files import DumpFiles, read_text
from kpemu.dumps.xtables.forms import FRAGMENT, LIST, read_iptables
from kpemu.dumps.xtables.listed import RATE, STATS
from kpemu.dumps.xtables.read import parse_ipset_save, read_ipvs
from kpemu.errors import InputError, Problem
from kpemu.proxy.ipvs.ipvsadm_text import service_line
from kpemu.proxy.modes import node_state
from kpemu.proxy.rules import BUILTIN_CHAINS, RuleSet
from kpemu.proxy.save import canonical_line
from kpemu.proxy.state import Walk

# The chains iptables-mode kube-proxy fills Service port by Service port while it iterates a Go map
# (pkg/proxy/iptables/proxier.go, syncProxyRules: `for svcName, svc := range proxier.svcPortMap` writes
# nat KUBE-SERVICES and KUBE-NODEPORTS, filter KUBE-SERVICES, KUBE-EXTERNAL-SERVICES, KUBE-PROXY-FIREWALL
# and KUBE-NODEPORTS), so the order between Service ports differs from sync to sync; after the loop it
# writes the "must be the last rule in this chain" jump to KUBE-NODEPORTS. Upstream's own tests sort
# the same chains before comparing (proxier_test.go, sortIPTablesRules).
MAP_ORDERED = frozenset({("nat", "KUBE-SERVICES"), ("nat", "KUBE-NODEPORTS"), ("filter", "KUBE-SERVICES"),
                         ("filter", "KUBE-EXTERNAL-SERVICES"), ("filter", "KUBE-PROXY-FIREWALL"),
                         ("filter", "KUBE-NODEPORTS")})
_LAST_RULE = "must be the last rule"
_PER_SERVICE = ("KUBE-SVC-", "KUBE-SEP-", "KUBE-SVL-", "KUBE-EXT-", "KUBE-FW-", "KUBE-XLB-")


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
                    key = service_key(r.parsed.comment)
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
    return service_key(_comment(line)) or owners.get(chain, NODE_WIDE)


def _dnat(lines: list[str]) -> str:
    for line in lines:
        m = re.search(r"--to-destination (\S+)", line)
        if m:
            return m.group(1)
    return "?"


def _comment(line: str) -> str | None:
    m = re.search(r'--comment "([^"]*)"', line) or re.search(r"--comment (\S+)", line)
    return m.group(1) if m else None


def service_port_order(lines: list[str]) -> list[str]:
    """A MAP_ORDERED chain's rules in an order that does not depend on kube-proxy's map iteration: by the
    Service port their comment names first (`ns/svc:port ...`, up to the first space), each Service port's
    rules in their own order, the "must be the last rule" jump last (where kube-proxy writes it)."""
    end = len(lines)
    while end and _LAST_RULE in (_comment(lines[end - 1]) or ""):
        end -= 1  # the jump(s) kube-proxy writes after the loop stay where they are; one elsewhere is drift
    return sorted(lines[:end], key=_service_port) + lines[end:]


def _service_port(line: str) -> str:
    """The Service port a rule's comment names (`ns/svc:port`); "" for none, and for a "must be the last
    rule" jump that is not last (sorted first, never to where kube-proxy writes it)."""
    comment = _comment(line) or ""
    return "" if _LAST_RULE in comment else comment.split(" ", 1)[0]


def compare_rules(drift: Drift, expected: RuleSet, dump: RuleSet,
                  unordered: frozenset[tuple[str, str]] = frozenset()) -> None:
    """Add the rule differences between kube-proxy's rules and a dump to `drift`, per Service; the chains
    of `unordered` (MAP_ORDERED in iptables mode) are compared in `service_port_order`, and a note says
    when that is what made them equal."""
    want, have = kube_lines(expected), kube_lines(dump)
    for chain in sorted(unordered):
        exp, got = want.get(chain), have.get(chain)
        if exp is None or got is None:
            continue
        want[chain], have[chain] = service_port_order(exp), service_port_order(got)
        if exp != got and want[chain] == have[chain]:
            drift.notes.append(f"{chain[0]}/{chain[1]}: the rules are in another order than kpemu writes them; "
                               "kube-proxy writes this chain's rules Service port by Service port in Go map order "
                               "(random from sync to sync), so only each Service port's own order is compared")
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


def check_dumps(topo: Any, topology_file: str, node: str, files: DumpFiles) -> Drift:
    """Compare the given dumps of `node` (files) with what kube-proxy would program from `topo` (read from
    `topology_file`); the IPVS dumps need a mode that balances with IPVS."""
    walk = node_state(topo, node).walk
    if (files.ipvs or files.ipset) and walk.ipvs is None:
        raise InputError(f"kpemu check-node: --ipvs/--ipset need kube-proxy in IPVS mode; topology {topology_file} "
                         f"has kubeProxy.mode {topo.kubeProxy.mode}")
    compared = [f"{f} ({what})" for f, what in ((files.ipvs, "ipvsadm"), (files.ipset, "ipset")) if f]
    dump = read_iptables(read_text(files.iptables_save), files.iptables_save, files.table) \
        if files.iptables_save else None
    if dump is not None:
        if dump.form == FRAGMENT:
            raise InputError([Problem(files.iptables_save, "", "a fragment (rules without their *table lines, "
                                      "chains missing) cannot be checked against all of kube-proxy's rules; give the "
                                      "whole output of iptables-save (or of iptables -t nat -S and iptables -S)")])
        compared.insert(0, dump.describe(files.iptables_save))
        if dump.form == LIST:  # iptables -S lists one table: compare the tables it lists
            walk = replace(walk, rules=_only(walk.rules, set(dump.rules.tables)))
    return _compare(
        topo, node, walk,
        iptables_save=dump.rules if dump is not None else None,
        ipvs=_servers(files.ipvs) if files.ipvs else None,
        ipsets=parse_ipset_save(read_text(files.ipset), files.ipset).sets if files.ipset else None,
        compared=compared,
    )


def _servers(path: str) -> list:
    """The virtual servers of an `ipvsadm -Sn` or `-Ln` file; --stats and --rate list no scheduler and no
    weight, which a check compares: refused."""
    listing = read_ipvs(read_text(path), path)
    if listing.form in (STATS, RATE):
        raise InputError([Problem(path, "", f"{listing.form} lists no scheduler and no weight, which check-node "
                                            "compares: give ipvsadm -Ln (or -Sn) output")])
    return listing.servers


def _only(rules: RuleSet | None, tables: set[str]) -> RuleSet | None:
    """`rules` with only the named tables."""
    return None if rules is None else RuleSet({n: t for n, t in rules.tables.items() if n in tables})


def _compare(topo: Any, node: str, walk: Walk, iptables_save: RuleSet | None,
             ipvs: list | None, ipsets: dict[str, tuple[str, tuple[str, ...]]] | None,
             compared: list[str]) -> Drift:
    """The differences of the parsed dumps from `walk`, what kube-proxy would program on `node`."""
    kp = topo.kubeProxy
    drift = Drift(node, f"kube-proxy {kp.version} {kp.mode} mode", compared, {s.key for s in topo.services})
    index = service_index(topo)
    if walk.ipvs is not None:
        if ipsets is not None:
            compare_ipsets(drift, dict(walk.ipvs.sets), ipsets, index)
        if ipvs is not None:
            compare_virtual_servers(drift, walk.ipvs.virtual_servers, ipvs, index)
    if iptables_save is not None:  # a mode without iptables rules (nftables) expects none
        compare_rules(drift, walk.rules or RuleSet(), iptables_save, MAP_ORDERED if walk.ipvs is None else frozenset())
    return drift
