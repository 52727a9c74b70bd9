"""`kpemu check-node --nft`: a node's `table ip kube-proxy` against what kube-proxy would program.

Both tables are compared in nft's listing form (kpemu.dumps.nft.read.listed): chains rule by rule in
order, sets and maps by their properties and their elements (as sets: the kernel lists elements
in its own order). The elements of dynamic sets (the affinity-* sets that `update @set` fills)
are the node's live state, not programmed, and are not compared. Every difference goes under the
Service it belongs to, read from the object's name (`service-HASH-ns/svc/proto/port`,
`endpoint-HASH-ns/svc/proto/port__ip/port`, `affinity-...`), an element's comment
(`ns/svc:port`), the chain a verdict-map element jumps to, or its ClusterIP/NodePort key; so
endpoint chains whose endpoint is not in the EndpointSlices are named as stale endpoints and
objects of deleted Services stand out.
"""

from __future__ import annotations

import re
from typing import Any

from kpemu.dumps.drift import NODE_WIDE, Drift, diff_lines, service_index, service_key
from kpemu.dumps.files import DumpFiles, read_text
from kpemu.dumps.nft.read import JSON_FORM, NftDump, listed, parse_nft
from kpemu.proxy.modes import node_state
from kpemu.proxy.nftables.listing import priority_text, set_properties
from kpemu.proxy.nftables.tx import Chain, Element, NSet, Table, quote

_OWNED = re.compile(r"^(?:service|local|external|firewall|endpoint|affinity)-[A-Z2-7]{8}-([^/]+)/([^/]+)/")
_ENDPOINT = re.compile(r"__([0-9.]+)/(\d+)$")
COMPARED = "kube-proxy rules and set/map elements"


def _chain_head(c: Chain, comment: bool = True) -> str:
    """A chain's name, hook and (unless `comment` is False) comment, as compared and reported."""
    parts = [f"chain {c.name}"]
    if c.hook:
        parts.append(f"type {c.hook.type} hook {c.hook.hook} priority {priority_text(c.hook)}")
    if comment and c.comment is not None:
        parts.append(f"comment {quote(c.comment)}")
    return "; ".join(parts)


def _set_head(s: NSet) -> str:
    return "; ".join([f"{s.kind} {s.name}", *set_properties(s)])


class _Owners:
    """Which Service an object or element belongs to: by name, comment, verdict, or address (the
    Services of the topology, then the addresses the tables' own map elements name a Service for, so a
    deleted Service's ClusterIP is still its own)."""

    def __init__(self, topo: Any, *tables: Table):
        self.index = service_index(topo)
        self.addresses: dict[str, str] = {}
        for t in tables:
            for s in t.sets.values():
                for e in s.elements:
                    owner = self.named(e)
                    if len(e.key) >= 3 and owner != NODE_WIDE:
                        self.addresses.setdefault(e.key[0], owner)

    @staticmethod
    def of_name(name: str) -> str:
        m = _OWNED.match(name)
        return f"{m[1]}/{m[2]}" if m else NODE_WIDE

    def named(self, e: Element) -> str:
        """The Service an element's comment (`ns/svc:port`) or verdict (`goto service-HASH-ns/svc/...`) names."""
        return service_key(e.comment) or self.of_name((e.value or "").partition(" ")[2])

    def of_element(self, e: Element) -> str:
        if self.named(e) != NODE_WIDE:
            return self.named(e)
        k = e.key
        if len(k) == 1:  # cluster-ips: a ClusterIP
            known = next((key for (addr, _, _), key in self.index.items() if addr == k[0]), NODE_WIDE)
            return known if known != NODE_WIDE else self.addresses.get(k[0], NODE_WIDE)
        if len(k) >= 3:
            return self.index.get((k[0], int(k[2]) if k[2].isdigit() else 0, k[1]), NODE_WIDE)
        if len(k) == 2 and k[1].isdigit():
            return self.index.get(("*", int(k[1]), k[0]), NODE_WIDE)
        return NODE_WIDE


def _endpoint(c: Chain) -> str:
    for r in c.rules:
        m = re.search(r"dnat to (\S+)", r.text)
        if m:
            return m[1]
    m = _ENDPOINT.search(c.name)
    return f"{m[1]}:{m[2]}" if m else "?"


def compare_chains(drift: Drift, want: Table, have: Table, comments: bool = True) -> None:
    """Chains: hook and comment (not the comment when `comments` is False: the dump's form does not carry
    it), then the rules in order (difflib), grouped per Service."""
    for name in [*want.chains, *(n for n in have.chains if n not in want.chains)]:
        w, h = want.chains.get(name), have.chains.get(name)
        g = drift.group(_Owners.of_name(name))
        exp = [r.commented() for r in w.rules] if w else []
        got = [r.commented() for r in h.rules] if h else []
        drift.rules_compared += len(got)
        if name.startswith("endpoint-") and (w is None or h is None):
            (g.missing_endpoints if h is None else g.stale_endpoints).append((_endpoint(w or h), f"chain {name}"))  # type: ignore[arg-type]
        if w is None or h is None:
            if not (exp or got):
                (g.missing if h is None else g.extra).append(_chain_head(w or h))  # type: ignore[arg-type]
        elif _chain_head(w, comments) != _chain_head(h, comments):
            g.changed.append(([_chain_head(w, comments)], [_chain_head(h, comments)]))
        diff_lines(exp, got, f"chain {name}", lambda _, g=g: g)


def compare_sets(drift: Drift, want: Table, have: Table, owners: _Owners) -> None:
    """Sets and maps: their properties, and their elements (except a dynamic set's)."""
    for name in [*want.sets, *(n for n in have.sets if n not in want.sets)]:
        w, h = want.sets.get(name), have.sets.get(name)
        s = w or h
        assert s is not None
        g = drift.group(owners.of_name(name))
        if w is None or h is None:
            (g.missing if h is None else g.extra).append(_set_head(s))
        elif _set_head(w) != _set_head(h):
            g.changed.append(([_set_head(w)], [_set_head(h)]))
        if "dynamic" in s.flags:
            continue
        exp = {f"{{ {e.body()} }}": e for e in (w.elements if w else [])}
        got = {f"{{ {e.body()} }}": e for e in (h.elements if h else [])}
        drift.rules_compared += len(got)
        for line in [x for x in exp if x not in got]:
            drift.group(owners.of_element(exp[line])).missing.append(f"{s.kind} {name}: {line}")
        for line in [x for x in got if x not in exp]:
            drift.group(owners.of_element(got[line])).extra.append(f"{s.kind} {name}: {line}")


def check_node_nft(topo: Any, node: str, dump: NftDump) -> Drift:
    """Compare `table ip kube-proxy` of a node's nftables dump with what kube-proxy would program."""
    kp = topo.kubeProxy
    drift = Drift(node, f"kube-proxy {kp.version} {kp.mode} mode", [dump.describe()], {s.key for s in topo.services},
                  compared_what=COMPARED)
    want = listed(node_state(topo, node).walk.nft)
    if dump.table is None:
        drift.group(NODE_WIDE).missing.append("table ip kube-proxy (the dump has no kube-proxy table)")
        return drift
    have = dump.table
    node_wide = drift.group(NODE_WIDE)
    comments = not _without_comments(dump)
    if not comments:
        drift.notes.append(f"{dump.form} does not carry the table's and chains' comments (libnftables' JSON "
                           "leaves them out): compared without them; `nft list ruleset` shows them")
    if comments and want.comment != have.comment:
        node_wide.changed.append(([f"table comment {want.comment!r}"], [f"table comment {have.comment!r}"]))
    for chain, policy in dump.policies.items():
        if policy != "accept":  # kube-proxy's base chains accept; a drop policy is someone else's edit
            node_wide.changed.append(([f"chain {chain}: policy accept"], [f"chain {chain}: policy {policy}"]))
    for name in [*want.counters, *(n for n in have.counters if n not in want.counters)]:
        if (name in want.counters) != (name in have.counters):
            (node_wide.missing if name in want.counters else node_wide.extra).append(f"counter {name}")
    owners = _Owners(topo, want, have)
    compare_sets(drift, want, have, owners)
    compare_chains(drift, want, have, comments)
    return drift


def _without_comments(dump: NftDump) -> bool:
    """Whether the dump is libnftables JSON that left the comments out: the table's, and every chain's
    (a JSON that carries one, as a newer libnftables may, is compared with them)."""
    return dump.form == JSON_FORM and dump.table is not None and dump.table.comment is None and \
        all(c.comment is None for c in dump.table.chains.values())


def check_nft_dump(topo: Any, topology_file: str, node: str, files: DumpFiles) -> Drift:
    """`check_node_nft` on the --nft dump (the table is all an nftables-mode node is checked by, so
    `topology_file` is not named in any message)."""
    return check_node_nft(topo, node, parse_nft(read_text(files.nft), files.nft))
