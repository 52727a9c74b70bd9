"""`kpemu trace`, whichever kind of state the node holds (pure): the packet to walk (from --src/--dst and
where it comes from), and the header, outcome lines and JSON document both kinds of trace print
(kpemu.dumps.xtables.trace, kpemu.dumps.nft.trace)."""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

from kpemu.analyse.oracle.types import Outcome, Packet, Prediction
from kpemu.errors import InputError

_ORIGINS = {"outside": "remote", "pod": "remote", "node": "local"}


def parse_endpoint(value: str, flag: str, need_port: bool) -> tuple[str, int | None]:
    """`IP[:PORT]` -> (ip, port); InputError names the flag."""
    ip, sep, port = value.rpartition(":") if ":" in value else (value, "", "")
    try:
        ipaddress.IPv4Address(ip)
        p = int(port) if sep else None
        if p is not None and not 0 < p < 65536:
            raise ValueError
    except ValueError:
        raise InputError(f"{flag} {value!r}: expected an IPv4 address{':PORT' if need_port else '[:PORT]'}, "
                         f"e.g. {'10.96.0.10:53' if need_port else '10.242.72.50'}") from None
    if need_port and p is None:
        raise InputError(f"{flag} {value!r}: the destination needs a port, e.g. 192.168.49.2:30180")
    return ip, p


def origin_of(src: str, local: frozenset[str], pod_cidr: str | None, given: str | None) -> str:
    """outside | pod | node: given, else the node itself when `src` is one of its addresses, a pod
    when it is in the node's podCIDR, else outside."""
    if given:
        return given
    if src in local:
        return "node"
    if pod_cidr and ipaddress.IPv4Address(src) in ipaddress.IPv4Network(pod_cidr):
        return "pod"
    return "outside"


def _origin_words(origin: str) -> str:
    return {"outside": "from outside", "pod": "from a pod", "node": "from the node itself"}[origin]


def _summary(o: Outcome) -> str:
    if o.ipvs:
        what = o.ipvs
    elif o.dnat:
        what = f"DNAT to {o.dnat} by {o.endpoint_chain}"
    else:
        what = "no DNAT"
    n = len(o.assumed)
    given = f"  if {n} assumption{'s hold' if n != 1 else ' holds'}" if o.assumed else ""
    return f"p={o.probability:g}  {what}  verdict {o.verdict}{given}"


def undecided_lines(pred: Prediction) -> list[str]:
    """What the walk could not decide, each fact once with the rule (and dump line) that needs it;
    empty when every outcome is decided."""
    facts = pred.undecided
    if not facts:
        return []
    many = len(facts) != 1
    out = [f"outcome undecided: {len(facts)} fact{'s' if many else ''} kpemu was not given "
           f"decide{'' if many else 's'} which outcome happens (each outcome below says which way it takes them; its "
           "probability holds given them):"]
    for a in facts:
        at = f" ({a.where})" if a.where else ""
        out.append(f"  {a.fact}: needed by {a.rule}{at}; {a.why}")
    return out


def assumption_lines(o: Outcome) -> list[str]:
    """An outcome's assumptions and inferences, one line each (indented for the outcome's block)."""
    out = [f"  {'if' if a.holds else 'if not'}: {a.fact}  ({a.rule}{', ' + a.where if a.where else ''})"
           for a in o.assumed]
    return out + [f"  inferred: {why}" for why in o.inferred]


def trace_header(node: str, source: str, local: frozenset[str], pred: Prediction, origin: str) -> list[str]:
    """The first lines of a trace as text: the packet, the rules walked, one summary line per outcome."""
    pkt = pred.packet
    n = len(pred.outcomes)
    ifaces = [f"{w} {v}" for w, v in (("in on", pkt.iif), ("out by", pkt.oif)) if v]
    return [f"packet {pkt.proto} {pkt.src}:{pkt.sport} -> {pkt.dst}:{pkt.dport} at node {node} "
            f"{_origin_words(origin)}" + (f" ({', '.join(ifaces)})" if ifaces else ""),
            f"rules: {source}; node addresses {', '.join(sorted(local, key=_ipkey))}",
            f"{n} outcome{'s' if n != 1 else ''}:", *(f"  {_summary(o)}" for o in pred.outcomes),
            *undecided_lines(pred)]


def result_line(o: Outcome, marked: str) -> str:
    """The outcome's mark (with `marked`, how the masquerade mark was set, when it was), masquerade and
    verdict."""
    parts = [f"mark {o.mark:#x}" + (f" ({marked})" if o.marked_masq else "")]
    parts.append(f"masquerade by {o.masquerade_chain}" if o.masquerade else "no masquerade")
    parts.append(f"verdict {o.verdict}")
    return "; ".join(parts)


def _ipkey(ip: str) -> int:
    return int(ipaddress.IPv4Address(ip))


def trace_document(node: str, source: str, local: frozenset[str], pred: Prediction, origin: str,
                   path: Callable[[Any], list[dict[str, Any]]]) -> dict[str, Any]:
    """A trace for scripts (`-o json`): the packet and each outcome, with its rule `path` (per dump kind)."""
    pkt = pred.packet
    return {
        "node": node,
        "rules": source,
        "nodeAddresses": sorted(local, key=_ipkey),
        "packet": {"proto": pkt.proto, "src": pkt.src, "sport": pkt.sport, "dst": pkt.dst, "dport": pkt.dport,
                   "from": origin, "iif": pkt.iif, "oif": pkt.oif},
        "decided": pred.decided,
        "undecided": [{"fact": a.fact, "rule": a.rule, "where": a.where, "why": a.why} for a in pred.undecided],
        "endpoints": pred.endpoints,
        "endpointChains": pred.endpoint_chains,
        "outcomes": [
            {
                "probability": o.probability,
                "verdict": o.verdict,
                "hooks": list(o.hooks),
                "dnat": o.dnat,
                "endpointChain": o.endpoint_chain,
                "ipvs": o.ipvs,
                "mark": hex(o.mark),
                "markedMasquerade": o.marked_masq,
                "masquerade": o.masquerade,
                "masqueradeChain": o.masquerade_chain,
                "assumed": [{"fact": a.fact, "holds": a.holds} for a in o.assumed],
                "inferred": list(o.inferred),
                "path": path(o),
            }
            for o in pred.outcomes
        ],
    }


def packet(local: frozenset[str], src: tuple[str, int | None], dst: tuple[str, int | None], proto: str,
           pod_cidr: str | None, given_origin: str | None, iif: str | None = None,
           oif: str | None = None) -> tuple[Packet, str]:
    """The packet to trace and where it comes from (outside | pod | node), on a node whose own addresses
    are `local` (iptables and nft traces alike), with the interfaces it arrives on and leaves by when
    given (--iif, --oif). Whether it came through a bridge port is not known (physdev rules are undecided)."""
    origin = origin_of(src[0], local, pod_cidr, given_origin)
    if iif is not None and _ORIGINS[origin] == "local":
        raise InputError(f"--iif {iif}: a packet from the node itself arrives on no interface; drop --iif, or "
                         "give --from outside|pod")
    return Packet(src=src[0], dst=dst[0], dport=dst[1] or 0, proto=proto, sport=src[1] or 40000,
                  origin=_ORIGINS[origin], bridged=None, iif=iif, oif=oif), origin
