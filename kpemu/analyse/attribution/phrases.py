"""What a hop's change is said as from the ledger alone (pure): the tunnel's outer header, the
conntrack entry that reverses NAT. Both attributions use them: xtables-monitor's
(kpemu.analyse.attribution.xtables) and nft monitor's (kpemu.analyse.explain.nft)."""

from __future__ import annotations

from kpemu.analyse.ledger import Hop


def outer_phrase(kind: str, hop: Hop, prev: Hop) -> str | None:
    """How the CNI wrapped (`encap`) or unwrapped (`decap`) the packet at `hop` (its outer header, or the
    previous hop's), e.g. "encapsulated VXLAN VNI 1 to 192.168.1.101"; None without an outer header."""
    o = hop.pkt.outer if kind == "encap" else prev.pkt.outer
    if o is None:
        return None
    name = "VXLAN" if o.type == "vxlan" else o.type.upper()
    vni = f" VNI {o.vni}" if o.vni is not None else ""
    return f"encapsulated {name}{vni} to {o.dst}" if kind == "encap" else f"decapsulated {name}{vni} from {o.src}"


def conntrack_phrase(entries: list[dict], node: str | None) -> str | None:
    """The first conntrack entry (on `node`, when given) as one line: both tuples and the mark."""
    for e in entries:
        if node and e.get("node") != node:
            continue
        o, r = e.get("original") or {}, e.get("reply") or {}
        mark = f" mark {e['mark']}" if e.get("mark") not in (None, "0") else ""
        return (f"conntrack {e.get('proto')} {o.get('src')}:{o.get('sport')} -> {o.get('dst')}:{o.get('dport')}"
                f" reply {r.get('src')}:{r.get('sport')} -> {r.get('dst')}:{r.get('dport')}{mark}")
    return None
