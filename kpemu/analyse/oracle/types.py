"""What both oracle walkers speak (pure): the packet, the steps and outcomes of its walk through one
node, the prediction they add up to, and the walk state and helpers the walkers share.

The iptables walker (kpemu.analyse.oracle.iptables) and the nftables walker
(kpemu.analyse.oracle.nft) both carry a `WalkState` down the chains and turn each finished one into
an `Outcome` with `outcome`.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kpemu.proxy.rules import Rule

LOCALHOST = ipaddress.IPv4Network("127.0.0.0/8")
MAX_OUTCOMES = 10_000  # paths of one packet a walker follows (kube-proxy's rules give one per endpoint)


class WalkLimit(ValueError):
    """The walk would pass one of the stated limits (nested jumps, MAX_OUTCOMES paths)."""


@dataclass(frozen=True)
class Packet:
    """The first packet of a connection as it enters the node (or leaves a local process)."""

    src: str
    dst: str
    dport: int
    proto: str = "tcp"
    sport: int = 40000
    origin: str = "remote"  # remote: arrives on an interface (PREROUTING); local: a node process (OUTPUT)
    mark: int = 0
    bridged: bool | None = False  # seen through br_netfilter (physdev --physdev-is-in true); None: not known
    iif: str | None = None  # the interface it arrives on (remote origin); None: not known
    oif: str | None = None  # the interface it leaves by, as given (else the routes walked with, else not known)


@dataclass(frozen=True)
class Assumption:
    """A fact the walk could not decide from what it was given, taken one way on this path (`holds`):
    `fact` says what (e.g. "the packet leaves by docker0", "-m limit --limit 5/min matches"), `rule`
    the rule where the walk first needed it, `where` its place in the dump ("line 12", or ""), `why`
    what would decide it."""

    fact: str
    holds: bool
    rule: str
    where: str
    why: str

    def describe(self) -> str:
        at = f" ({self.where})" if self.where else ""
        return f"{'assumed' if self.holds else 'assumed not'}: {self.fact}, at {self.rule}{at}: {self.why}"


@dataclass(frozen=True)
class Route:
    """Where a destination leaves the node: `net` (CIDR) by `iface`, and `why` kpemu knows it (the rule or
    the option it was inferred from)."""

    net: str
    iface: str
    why: str


@dataclass(frozen=True)
class Step:
    """One rule that matched (or a built-in chain's policy, `rule` None) in table/chain."""

    table: str
    chain: str
    rule: Rule | None
    # JUMP:<chain> | RETURN | ACCEPT | DNAT | MASQUERADE | MARK | DROP | REJECT | CONTINUE | POLICY:<ACCEPT|DROP>
    verdict: str

    @property
    def target(self) -> str | None:
        return self.rule.target if self.rule else None

    def text(self) -> str:
        """`-A CHAIN args` (restore form) or `CHAIN policy ACCEPT`."""
        policy = self.verdict.partition(":")[2] or "ACCEPT"
        return self.rule.restore_line() if self.rule else f"{self.chain} policy {policy}"


@dataclass(frozen=True)
class Outcome:
    """One possible path of the packet through the node, with its probability."""

    probability: float
    steps: tuple[Step, ...]
    hooks: tuple[str, ...]
    verdict: str  # ACCEPT | DROP | REJECT
    dnat: str | None = None  # "ip:port" set by DNAT (or IPVS)
    endpoint_chain: str | None = None  # the KUBE-SEP chain that did the DNAT
    mark: int = 0  # the skb mark when it reached POSTROUTING (before the xor)
    marked_masq: bool = False  # KUBE-MARK-MASQ ran
    masquerade: bool = False  # a MASQUERADE rule matched in POSTROUTING
    masquerade_chain: str | None = None
    ipvs: str | None = None  # "TCP vip:port rr -> rip:port" when IPVS chose the real server
    assumed: tuple[Assumption, ...] = ()  # what this path took for granted (its probability is given these)
    inferred: tuple[str, ...] = ()  # what the walk inferred on this path and from what (e.g. an interface)

    @property
    def decided(self) -> bool:
        """Whether the path holds whatever the facts kpemu was not given are."""
        return not self.assumed

    @property
    def chains(self) -> list[str]:
        """Chains the packet entered, in order, without repeats."""
        out: list[str] = []
        for s in self.steps:
            if s.chain not in out:
                out.append(s.chain)
        return out

    def kube_path(self) -> list[tuple[str, str, str | None]]:
        """(table, chain, target) of the matched kube-proxy rules (what a kernel trace must show)."""
        return [(s.table, s.chain, s.target) for s in self.steps if s.rule is not None and _is_kube(s)]


@dataclass
class Prediction:
    """Every outcome of a packet on one node, and what they have in common."""

    packet: Packet
    node: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def endpoints(self) -> dict[str, float]:
        """DNAT target -> total probability ("ip:port"; IPVS real servers too)."""
        out: dict[str, float] = {}
        for o in self.outcomes:
            if o.dnat:
                out[o.dnat] = out.get(o.dnat, 0.0) + o.probability
        return out

    @property
    def endpoint_chains(self) -> dict[str, float]:
        """KUBE-SEP chain -> total probability."""
        out: dict[str, float] = {}
        for o in self.outcomes:
            if o.endpoint_chain:
                out[o.endpoint_chain] = out.get(o.endpoint_chain, 0.0) + o.probability
        return out

    @property
    def verdicts(self) -> set[str]:
        return {o.verdict for o in self.outcomes}

    @property
    def masquerade(self) -> bool | None:
        """True/False when every outcome agrees, None when it depends on the endpoint chosen."""
        vals = {o.masquerade for o in self.outcomes}
        return vals.pop() if len(vals) == 1 else None

    @property
    def marked(self) -> bool | None:
        vals = {o.marked_masq for o in self.outcomes}
        return vals.pop() if len(vals) == 1 else None

    @property
    def decided(self) -> bool:
        """Whether every outcome is decided (no path rests on a fact the walk was not given)."""
        return all(o.decided for o in self.outcomes)

    @property
    def undecided(self) -> list[Assumption]:
        """The facts the walk could not decide, each once, in the order the walk met them (taken as holding)."""
        out: dict[str, Assumption] = {}
        for o in self.outcomes:
            for a in o.assumed:
                out.setdefault(a.fact, replace(a, holds=True))
        return list(out.values())

    def outcome_for(self, dnat: str) -> Outcome | None:
        """The outcome that DNATs to `dnat` (the backend that answered)."""
        return next((o for o in self.outcomes if o.dnat == dnat), None)


@dataclass(frozen=True)
class WalkState:
    """A packet part-way through a walk: its (possibly NATed) addresses and mark, and what acted on it."""

    pkt: Packet
    src: str
    dst: str
    dport: int
    mark: int
    steps: tuple[Step, ...] = ()
    dnat: str | None = None  # "ip:port" once DNATed
    endpoint_chain: str | None = None  # the chain that did the DNAT
    marked: bool = False  # the masquerade mark was set
    masq: bool = False  # a masquerade (or SNAT) rule matched
    masq_chain: str | None = None
    ipvs: str | None = None  # IPVS's choice, when IPVS picked the real server
    post_mark: int = 0  # the mark as it reached nat POSTROUTING (iptables; 0: not recorded)
    hook: str = ""  # the hook being walked (PREROUTING, INPUT, FORWARD, OUTPUT, POSTROUTING)
    assumed: tuple[Assumption, ...] = ()  # facts taken one way on this path
    inferred: tuple[str, ...] = ()
    ctmark: int = 0  # the connection's mark (CONNMARK)
    untracked: bool = False  # NOTRACK / CT --notrack in raw: no conntrack entry, no NAT
    recent: frozenset[tuple[str, str]] = frozenset()  # (list, address) that -m recent --set added on this path

    def fact(self, key: str) -> bool | None:
        """How this path took `key` (an Assumption's fact), None when it has not yet."""
        return next((a.holds for a in self.assumed if a.fact == key), None)


def start(pkt: Packet) -> WalkState:
    """The packet before any rule saw it."""
    return WalkState(pkt, pkt.src, pkt.dst, pkt.dport, pkt.mark)


def outcome(prob: float, s: WalkState, verdict: str, hooks: tuple[str, ...]) -> Outcome:
    """One finished path as an Outcome (probabilities rounded so that N equal arms add up to 1)."""
    return Outcome(probability=round(prob, 10), steps=s.steps, hooks=hooks, verdict=verdict, dnat=s.dnat,
                   endpoint_chain=s.endpoint_chain, mark=s.post_mark or s.mark, marked_masq=s.marked,
                   masquerade=s.masq, masquerade_chain=s.masq_chain, ipvs=s.ipvs, assumed=s.assumed,
                   inferred=s.inferred)


def in_network(addr: str, net: str) -> bool:
    """Whether IPv4 `addr` is in `net` (an address or a CIDR)."""
    return ipaddress.IPv4Address(addr) in ipaddress.ip_network(net.strip(), strict=False)


def is_local(addr: str, local: set[str]) -> bool:
    """Whether the node delivers `addr` to itself: one of its own addresses, or loopback."""
    return addr in local or in_network(addr, str(LOCALHOST))


def _is_kube(s: Step) -> bool:
    t = s.target or ""
    return s.table == "kube-proxy" or s.chain.startswith("KUBE-") or t.startswith("KUBE-")
