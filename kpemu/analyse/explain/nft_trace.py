"""What `nft monitor trace` says of one connection, for its verdict (pure): the rules (or base chain
policies) whose verdict was drop, or that rejected, on its packets (kpemu.analyse.verdict.RuleDrop),
the nodes that traced it and those where kube-proxy's table DNATed it.

A kube-proxy verdict map's element explains its drop (`no-endpoint-nodeports` { tcp . 30081 : drop }):
kube-proxy writes `drop` there for a Service whose traffic policy is Local and that has no endpoint on
the node, and `goto reject-chain` for one without any endpoint (pkg/proxy/nftables/proxier.go); the
element's comment names the Service port. A `reject` in a chain some verdict map sent the packet to is
explained by that map's element.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from kpemu.analyse.attribution.nft import KUBE_PROXY, NftHop, journeys, map_element, rule_comment
from kpemu.analyse.ledger import ConnLedger, conn_tuples
from kpemu.analyse.verdict import WHY, ConnTrace, RuleDrop
from kpemu.proxy.nftables import eras as E
from kpemu.proxy.nftables.tx import Table

REJECT_DEFAULT = "icmp-port-unreachable"  # what `reject` sends back in an ip table unless told
_REJECT = re.compile(r"(?:^|\s)reject(?: with (icmp|tcp) (?:type )?(\S+))?(?:\s|$)")

# (map, the verdict its element gave) -> which of the verdict's WHY the drop is, and the words kube-proxy's
# other modes use for it (iptables writes them in its rule's comment)
_MAP_WHY = {(E.NO_ENDPOINT_NODEPORTS, "drop"): ("no local endpoints", "has no local endpoints"),
            (E.NO_ENDPOINT_SERVICES, "drop"): ("no local endpoints (internal)", "has no local endpoints"),
            (E.NO_ENDPOINT_SERVICES, f"goto {E.REJECT_CHAIN}"): ("no endpoints", "has no endpoints"),
            (E.NO_ENDPOINT_NODEPORTS, f"goto {E.REJECT_CHAIN}"): ("no endpoints", "has no endpoints"),
            (E.FIREWALL_IPS, "drop"): ("source ranges", "is not allowed from this source")}


def _fields(packet: str) -> tuple | None:
    f = re.search(r"\bip saddr (\S+) ip daddr (\S+) .*?\b(tcp|udp|sctp) sport (\d+) \3 dport (\d+)", packet)
    return (f[3], f[1], int(f[4]), f[2], int(f[5])) if f else None


def _ip_id(packet: str) -> int | None:
    m = re.search(r"\bip id (\d+)", packet)
    return int(m[1]) if m else None


def _reject_type(rule: str) -> str | None:
    m = _REJECT.search(rule)
    if not m:
        return None
    return f"{m[1]}-{m[2]}" if m[2] else REJECT_DEFAULT


def _hook(table: Table | None, chain: str | None) -> str | None:
    c = table.chains.get(chain or "") if table is not None else None
    return c.hook.hook.upper() if c is not None and c.hook is not None else None


def _drop(node: str, hops: Sequence[NftHop], i: int, table: Table | None, direction: str) -> RuleDrop:
    """The RuleDrop of `hops[i]` (a drop or a reject), with the verdict-map element that sent it there."""
    h = hops[i]
    packet = next((x.packet for x in reversed(hops[:i]) if x.packet), None)
    base = next((x.chain for x in reversed(hops[:i]) if x.packet is not None and x.table == h.table), None)
    icmp = _reject_type(h.rule_text or "")
    # the element behind it: its own map's, or that of the map whose verdict sent the packet to its chain
    callers = [x for x in reversed(hops[:i + 1]) if x.table == h.table and x.rule is not None
               and (x is h or (x.verdict or "").split()[-1:] == [h.chain])]
    elem = next((e for x in callers if table is not None and (e := map_element(x, table, packet))), None)
    what = f"{h.chain}: {h.rule_text}" if h.rule is not None else f"{h.chain} {h.verdict}"
    note = why = None
    if elem is not None:
        what += f" (element {{ {' . '.join(elem.key)} : {elem.value} }} of map {elem.container})"
        cause = _MAP_WHY.get((elem.container, elem.value or ""))
        if cause:
            why = WHY[cause[0]]
            note = f"{elem.comment} {cause[1]}" if elem.comment else cause[1]
    if note is None and h.rule is not None:
        note = rule_comment(h.rule)
    if why is None and re.match(r"ct state invalid\b", h.rule_text or ""):
        why = WHY["invalid"]
    return RuleDrop(node, _hook(table, base), h.table, h.chain, h.rule, icmp is not None, icmp, direction,
                    what, note, why or "")


def nft_conn_trace(cl: ConnLedger, texts: Mapping[str, str], tables: Mapping[str, Table],
                   order: Sequence[str] = ()) -> ConnTrace:
    """The connection's packets in each node's trace text (`texts`, node -> `nft monitor trace`
    output), read against that node's kube-proxy table (`tables`), in the verdict's terms; `order`: the
    nodes in the order the connection's packets crossed them (its drops are given in that order)."""
    tuples = conn_tuples(cl)
    replies = {h.pkt.ip_id for h in cl.reply}
    drops: list[RuleDrop] = []
    traced, dnat = set(), set()
    nodes = sorted(texts, key=lambda n: order.index(n) if n in order else len(order))
    for node in nodes:
        for hops in journeys(texts[node]):
            pkts = [x.packet for x in hops if x.packet]
            if not any(_fields(p) in tuples for p in pkts):
                continue
            traced.add(node)
            if any(x.table == KUBE_PROXY and re.search(r"\bdnat (?:ip )?to ", x.rule_text or "") for x in hops):
                dnat.add(node)
            direction = "reply" if _ip_id(pkts[0]) in replies else "request"
            for i, h in enumerate(hops):
                if h.verdict in ("drop", "policy drop"):
                    drops.append(_drop(node, hops, i, tables.get(node) if h.table == KUBE_PROXY else None,
                                       direction))
                    break
    return ConnTrace(tuple(drops), frozenset(traced), frozenset(dnat))
