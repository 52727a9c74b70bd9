"""Read `nft monitor trace` output and attribute each hop to the rule or verdict-map element (pure).

Lines look like `trace id 5f2a9c1e ip kube-proxy services rule ip daddr . meta l4proto . th dport
vmap @service-ips (verdict goto service-ULMVA6XW-ns1/svc1/tcp/p80)` (rules in nft's listing form,
see kpemu.proxy.nftables.listing): the kernel reports every rule
that matched (with the verdict it gave, `continue` for a statement), a chain's `policy`, and the
packet itself. Hops are grouped by trace id (one id per packet). A hop whose rule looked a verdict
map up is attributed to the map element that gave its verdict; a `numgen ... vmap { }` hop to the
arm it took; 1.36's `dnat ip to numgen random mod N map { }` hop to the arm whose address the
packet was DNATed to (the kernel lists `dnat ip addr . port to` as `dnat ip to`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from kpemu.proxy.nftables.tx import Element, Table

KUBE_PROXY = "kube-proxy"
_LINE = re.compile(r"^trace id (\S+) (?:(ip6?|inet|arp|bridge|netdev) )?(\S+) (\S+) "
                   r"(?:rule (.*) \(verdict (.+)\)|verdict (.+)|policy (\S+)|(packet|conntrack): (.*))$")
_COMMENT = re.compile(r' comment "((?:[^"\\]|\\.)*)"$')


@dataclass(frozen=True)
class NftHop:
    """One trace event: the rule (None for a policy / chain verdict / packet line) and verdict."""

    trace_id: str
    table: str
    chain: str
    rule: str | None
    verdict: str | None
    packet: str | None = None

    @property
    def rule_text(self) -> str | None:
        """The rule without its trailing comment (as kube-proxy's transaction writes it)."""
        return None if self.rule is None else _COMMENT.sub("", self.rule)


def rule_comment(rule: str) -> str | None:
    """The trailing `comment "..."` of a rule as the trace lists it, or None."""
    m = _COMMENT.search(rule)
    return m[1] if m else None


def parse_trace(text: str) -> dict[str, list[NftHop]]:
    """Trace id -> its hops in order (lines that are not trace events are skipped)."""
    out: dict[str, list[NftHop]] = {}
    for line in text.splitlines():
        m = _LINE.match(line.strip())
        if not m:
            continue
        tid, _fam, table, chain, rule, rverdict, cverdict, policy, _kind, packet = m.groups()
        verdict = rverdict or cverdict or (f"policy {policy}" if policy else None)
        out.setdefault(tid, []).append(NftHop(tid, table, chain, rule, verdict, packet))
    return out


def journeys(text: str) -> list[list[NftHop]]:
    """One hop list per packet: trace groups joined by the packet's (source, source port, IP id).

    The kernel gives a packet a new trace id when NAT rewrites it (its hash is recomputed), so
    the events after kube-proxy's DNAT arrive under another id than those before it."""
    out: dict[tuple[str, ...], list[NftHop]] = {}
    for tid, hops in parse_trace(text).items():
        pkt = next((h.packet for h in hops if h.packet), "") or ""
        f = re.search(r"\bip saddr (\S+) .*?\bip id (\d+) .*?\b(?:tcp|udp|sctp) sport (\d+)", pkt)
        out.setdefault(tuple(f.groups()) if f else (tid,), []).extend(hops)
    return list(out.values())


def kube_path(hops: list[NftHop]) -> list[tuple[str, str, str | None]]:
    """(table, chain, verdict) of the kube-proxy rules that acted, as the oracle's kube_path() gives."""
    return [(h.table, h.chain, h.verdict) for h in hops if h.table == KUBE_PROXY and h.rule is not None]


def packet_fields(packet: str) -> dict[str, str]:
    """ip saddr / ip daddr / proto / dport of a trace `packet:` line."""
    out = {}
    for k in ("ip saddr", "ip daddr"):
        m = re.search(rf"\b{k} (\S+)", packet)
        if m:
            out[k] = m[1]
    m = re.search(r"\b(tcp|udp|sctp) dport (\d+)", packet)
    if m:
        out["proto"], out["dport"] = m[1], m[2]
    return out


DNAT_MAP = re.compile(r"\bdnat ip to numgen random mod (\d+) map \{ (.*) \}$")


def _dnat_map_arm(text: str, dnat: str | None) -> str | None:
    """The arm of a 1.36 `dnat ip to numgen ... map { }` rule that DNATs to `dnat` (IP:port), as a
    phrase; None if `text` is not such a rule or no arm matches."""
    m = DNAT_MAP.search(text)
    if not m or not dnat:
        return None
    ip, _, port = dnat.rpartition(":")
    arm = next((a.strip() for a in m[2].split(",") if a.split(" : ", 1)[1].strip() == f"{ip} . {port}"), None)
    return f"numgen map arm {arm} (1 in {m[1]})" if arm else None


def map_element(hop: NftHop, table: Table, packet: str | None = None) -> Element | None:
    """The element of the verdict map `hop`'s rule looked up (`vmap @name`) that gave its verdict, for
    `packet`'s protocol, port and (for a three-part key) destination; None for other rules."""
    m = re.search(r"vmap @(\S+)$", hop.rule_text or "")
    if not (m and hop.verdict and m[1] in table.sets):
        return None
    f = packet_fields(packet or "")
    proto, port = f.get("proto"), f.get("dport")
    for e in table.sets[m[1]].elements:
        if e.value == hop.verdict and (not f or (e.key[-2:] == (proto, port)
                                                 and (len(e.key) == 2 or e.key[0] == f.get("ip daddr")))):
            return e
    return None


def attribute(hop: NftHop, table: Table, packet: str | None = None, dnat: str | None = None) -> str:
    """What acted at `hop`: the verdict-map element or numgen arm behind its verdict (or, for a DNAT
    map, the arm that gave `dnat`), else the rule."""
    text = hop.rule_text or ""
    arm = _dnat_map_arm(text, dnat)
    if arm:
        return arm
    e = map_element(hop, table, packet)
    if e is not None:
        return f"element {{ {' . '.join(e.key)} : {e.value} }} of map {e.container}"
    m = re.search(r"numgen random mod (\d+) vmap \{ (.*) \}$", text)
    if m and hop.verdict:
        arm = next((a for a in re.split(r"\s*,\s*", m[2]) if a.split(" : ", 1)[1].strip() == hop.verdict), None)
        if arm:
            return f"numgen arm {arm.strip()} (1 in {m[1]})"
    return f"rule {hop.rule}"
