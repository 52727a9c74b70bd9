"""The nftables oracle (pure): walk kube-proxy's `table ip kube-proxy` for one packet.

Like upstream's tracePacket (pkg/proxy/nftables/helpers_test.go) but in kernel order: the base
chains of each hook run by priority (prerouting, then input or forward after the routing
decision, or output for a local process; postrouting last), `jump` / `goto` / `return` behave as in
the kernel, verdict maps are looked up by their concatenated key, `numgen random mod N vmap`
splits the walk into N outcomes of probability 1/N, sets and anonymous sets are CIDR-aware,
`fib ... type local` asks the node's addresses, and the mark is tracked through `mark set` /
`mark and M == 0 return` (1.36+: inline `mark set mark or M` statements, `mark and M != 0 ...
masquerade`, `ct status dnat` with the `@hairpin-connections` 4-tuple set, and `dnat ip addr . port
to numgen random mod N map { ... }`, N outcomes of 1/N each, done by the policy chain itself;
1.37+: a named `counter name "C"` passes, a one-endpoint policy chain's `dnat to A:P`).
Every matching rule is a step whose verdict is what `nft monitor trace`
prints for it (`continue`, `jump X`, `goto X`, `return`, `accept`, `drop`), so the kernel's trace
and the model can be compared rule by rule.
Rules are read as kube-proxy writes them or as `nft list` prints them (a node's real dump,
kpemu.dumps.nft.read), so both are walked alike.

A real node's other IPv4 tables (`NftTable`: a distribution's `inet filter`, docker's iptables-nft
`ip filter` with its FORWARD policy drop) run at the same hooks: their base chains are walked with
kube-proxy's by priority (at equal priority the one listed later first, as the kernel runs them), a
base chain's policy applies where the walk falls through it, a `type nat` chain is passed
over once the connection has that NAT (the kernel's nf_nat_inet_fn stops at the first), and what
the walker does not model in them (`limit`, `tcp flags`, `queue`, ...) makes the path undecided,
both ways shown.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from kpemu.analyse.oracle.types import (
    MAX_OUTCOMES,
    Assumption,
    Packet,
    Prediction,
    Step,
    WalkLimit,
    WalkState,
    in_network,
    is_local,
    outcome,
    start,
)
from kpemu.analyse.oracle.xtmatch import Unknown
from kpemu.proxy.nftables.tx import Chain, Table

TABLE = "kube-proxy"
# what may follow a rule's matches: a statement or verdict the walker acts on
_ACTION = re.compile(r"(accept|drop|reject|return|continue|jump |goto |numgen |mark set |meta mark set |"
                     r"meta l4proto \S+ dnat |dnat |masquerade|update @|ip daddr \. meta l4proto \. th dport vmap |"
                     r"meta l4proto \. th dport vmap |log(?:\s|$)|snat |redirect|queue|tproxy |synproxy|notrack|"
                     r"flow (?:add|offload) |meta nftrace set |ct (?:mark|zone|helper|event|expectation|timeout|label) "
                     r"set |dup |fwd |add @)")
# statements that change nothing the walk looks at: the rule goes on to what follows them
_PASSING = re.compile(r'(?:log(?: (?:prefix "(?:[^"\\]|\\.)*"|level \S+|flags \S+|group \d+|snaplen \d+|'
                      r'queue-threshold \d+))*|counter(?: packets \d+ bytes \d+)?|counter name "[^"]*"|'
                      r"meta nftrace set \S+|ct (?:mark|zone|helper|event|expectation|timeout|label) set \S+|"
                      r"flow (?:add|offload) @\S+|dup to \S+(?: device \S+)?|(notrack))(?:\s+|$)")
# statements whose outcome the walk is not given: the path is undecided, accepted one way and dropped the other
_UNDECIDED = {"redirect": "a redirect DNATs to the node's own address on a port the walk does not follow",
              "queue": "a userspace program decides the verdict", "tproxy": "it depends on a local socket for the "
              "packet", "synproxy": "SYNPROXY answers the SYN itself", "fwd": "the packet is sent out of a device"}
_VERDICT_TAIL = re.compile(r"(?:^|\s)((?:accept|drop|return|continue|reject(?: with .*)?|(?:jump|goto) \S+))$")


def _addr_in(addr: str, spec: str) -> bool:
    """Whether `addr` is in an nft address value: an address, a CIDR or an `A-B` range."""
    lo, dash, hi = spec.strip().partition("-")
    if dash:
        return ipaddress.IPv4Address(lo) <= ipaddress.IPv4Address(addr) <= ipaddress.IPv4Address(hi)
    return in_network(addr, spec)


def _trailing_verdict(rest: str) -> str:
    """The verdict a rule's text ends with ("" when it has none: the rule continues)."""
    m = _VERDICT_TAIL.search(rest)
    return m[1] if m else ""
MAX_DEPTH = 16  # nested jumps, as the kernel's NFT_JUMP_STACK_SIZE (nft -f refuses deeper ones: EMLINK)
_HOOK_ORDER = {"remote-local": ("prerouting", "input"), "remote-forward": ("prerouting", "forward", "postrouting"),
               "local": ("output", "postrouting")}


@dataclass(frozen=True)
class NftRule:
    """A matched nft rule as an oracle step: chain, text as kube-proxy wrote it, comment, and the
    verdict it gave (`target`, as `nft monitor trace` prints it); `table` its `family name`."""

    chain: str
    text: str
    comment: str | None
    target: str
    table: str = f"ip {TABLE}"

    def restore_line(self) -> str:
        """The rule as a transaction line (what reports quote)."""
        tail = f' comment "{self.comment}"' if self.comment else ""
        return f"add rule {self.table} {self.chain} {self.text}{tail}"


@dataclass(frozen=True)
class NftTable:
    """Another IPv4 table of a node (`family name`), walked beside kube-proxy's: its objects, its base
    chains' policies, why its rules were not read ("" when they were; then each of its base chains is
    undecided, both ways), and the objects the reader passed over (flowtables, quotas, ...)."""

    name: str
    table: Table
    policies: Mapping[str, str] = field(default_factory=dict)
    unread: str = ""
    passed: tuple[str, ...] = ()


class _Walker:
    """The walk through one table (jumps stay in their table); `name` its `family name`."""

    def __init__(self, table: Table, local: set[str], masq_bit: int | None, name: str = f"ip {TABLE}",
                 policies: Mapping[str, str] | None = None, unread: str = ""):
        self.t, self.local, self.masq_bit, self.name, self.unread = table, local, masq_bit, name, unread
        self.step_table = TABLE if name == f"ip {TABLE}" else name  # Step.table: kube-proxy's steps say "kube-proxy"
        self.policies = policies or {}

    # -- matches ---------------------------------------------------------------------------------
    def _lookup(self, name: str, key: tuple[str, ...]) -> str | None:
        s = self.t.sets.get(name)
        if s is None:
            return None
        return next((e.value for e in s.elements if e.key == key), None)

    def _in_set(self, name: str, addr: str) -> bool:
        s = self.t.sets.get(name)
        return s is not None and any(_addr_in(addr, e.key[0]) for e in s.elements)

    def _addr(self, st: WalkState, which: str) -> str:
        return st.src if which == "s" else st.dst

    def _match(self, text: str, st: WalkState) -> tuple[bool, str]:
        """Consume the match part of a rule; (matched, the rest: the statement/verdict part)."""
        rest = text
        while rest:
            m = re.match(r"ct state new(?![,\w])\s*", rest)
            if m:
                rest = rest[m.end():]
                continue
            m = re.match(r"ct status dnat\s*", rest)
            if m:
                if st.dnat is None:
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"ip saddr \. ip daddr \. meta l4proto \. th dport @(\S+)\s*", rest)
            if m:  # 1.36+ hairpin-connections: (source, DNATed destination, protocol, port)
                s = self.t.sets.get(m[1])
                key = (st.src, st.dst, st.pkt.proto, str(st.dport))
                if s is None or all(e.key != key for e in s.elements):
                    return False, ""
                rest = rest[m.end():]
                continue
            if re.match(r"ct state invalid\s*", rest):  # the first packet of a connection is new
                return False, ""
            m = re.match(r"ip daddr \. meta l4proto \. th dport (\. ip saddr )?@(\S+)\s*", rest)
            if m and not re.match(r"vmap ", rest[m.end():]):
                key = (st.dst, st.pkt.proto, str(st.dport))
                s = self.t.sets.get(m[2])
                hit = s is not None and any(e.key[:3] == key and (not m[1] or in_network(st.src, e.key[3]))
                                            for e in s.elements)
                if not hit:
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"ip daddr \. meta l4proto \. th dport vmap @(\S+)$", rest)
            if m:
                v = self._lookup(m[1], (st.dst, st.pkt.proto, str(st.dport)))
                return (v is not None, v or "")
            m = re.match(r"meta l4proto \. th dport vmap @(\S+)$", rest)
            if m:
                v = self._lookup(m[1], (st.pkt.proto, str(st.dport)))
                return (v is not None, v or "")
            m = re.match(r"ip ([sd])addr (!= )?@(\S+)\s*", rest)
            if m:
                if self._in_set(m[3], self._addr(st, m[1])) == bool(m[2]):
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"ip ([sd])addr (!= )?\{ ([^}]*) \}\s*", rest)
            if m:
                hit = any(_addr_in(self._addr(st, m[1]), c) for c in m[3].split(","))
                if hit == bool(m[2]):
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"ip ([sd])addr (!= )?([0-9./-]+)\s*", rest)
            if m:
                if _addr_in(self._addr(st, m[1]), m[3]) == bool(m[2]):
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"fib ([sd])addr type local\s*", rest)
            if m:
                if self._addr(st, m[1]) not in self.local:
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"(tcp|udp|sctp|udplite|th) (dport|sport) (!= )?(\{ [^}]* \}|@\S+|[\w-]+)\s*", rest)
            if m and not re.match(r"(?:vmap|map|\.)", rest[m.end():]):
                if m[1] != "th" and m[1] != st.pkt.proto:  # nft adds the protocol's dependency, negated or not
                    return False, ""
                fact = f"{m[1]} {m[2]} {m[4]}"
                got = self._port_in(m[4], st.dport if m[2] == "dport" else st.pkt.sport, fact)
                if isinstance(got, Unknown):
                    known = st.fact(fact)
                    if known is None:
                        return got, ""
                    got = known
                if got == bool(m[3]):
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"(?:ip6|icmpv6|meta nfproto ipv6|ip6 nexthdr)(?:\s|$)", rest)
            if m:  # nft's implicit `meta nfproto ipv6`: never an IPv4 packet, negated or not
                return False, ""
            m = re.match(r"meta nfproto ipv4\s*", rest)
            if m:
                rest = rest[m.end():]
                continue
            m = re.match(r"icmp(?:\s|$)", rest)
            if m and st.pkt.proto != "icmp":
                return False, ""
            m = re.match(r"ct state vmap \{ ([^}]*) \}$", rest)
            if m:  # the first packet's state is new: its arm, or none (the rule goes on)
                arms = dict(a.split(" : ", 1) for a in re.split(r"\s*,\s*", m[1].strip()) if " : " in a)
                v = next((arms[k].strip() for k in arms if k.strip() in self._ct_states(st)), None)
                return (v is not None, v or "")
            m = re.match(r"(?:mark and|meta mark &) (0x[0-9a-f]+) (==|!=) (?:0x)?0+\s*", rest)  # written | listed
            if m:
                if bool(st.mark & int(m[1], 16)) != (m[2] == "!="):
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"(?:meta )?mark (?:(?:and|&) (0x[0-9a-f]+) )?(!= |== )?(0x[0-9a-f]+|\d+)\s*", rest)
            if m and not re.match(r"(?:set|vmap|map)\b", rest[m.end():]):  # another table's mark test
                mask = int(m[1], 16) if m[1] else 0xFFFFFFFF
                if ((st.mark & mask) == int(m[3], 0)) == (m[2] == "!= "):
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"counter(?: packets \d+ bytes \d+)?\s*", rest)
            if m and m.end():
                rest = rest[m.end():]
                continue
            m = re.match(r"(iifname|oifname|iif|oif) (!= )?(\{ [^}]* \}|\S+)\s*", rest)
            if m:
                got = self._ifname(m[1], bool(m[2]), m[3], st)
                if got is not True:
                    return got, rest[m.end():]
                rest = rest[m.end():]
                continue
            m = re.match(r"ct state (!= )?(\{ [^}]* \}|[a-z,]+)\s*", rest)
            if m:
                states = {w for w in re.split(r"[\s,{}]+", m[2]) if w}
                if bool(states & self._ct_states(st)) == bool(m[1]):
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"(?:meta l4proto|ip protocol) (!= )?(\{ [^}]* \}|\S+)\s*", rest)
            if m and not re.match(r"(?:dnat|\.)", rest[m.end():]):
                protos = {w for w in re.split(r"[\s,{}]+", m[2]) if w}
                if (st.pkt.proto in protos) == bool(m[1]):
                    return False, ""
                rest = rest[m.end():]
                continue
            if _ACTION.match(rest):
                return True, rest
            u = self._unknown(rest)
            known = st.fact(u.fact)
            if known is None:
                return u, ""
            return (True, _trailing_verdict(rest)) if known else (False, "")
        return True, ""

    def _port_in(self, value: str, port: int, expr: str) -> bool | Unknown:
        """Whether `port` is in a port match's value (`N`, `N-M`, `{ N, N-M }`, `@set`); Unknown for a
        service name (what `nft -S` prints) or a set the table lacks."""
        if value.startswith("@"):
            named = self.t.sets.get(value[1:])
            if named is None:
                return Unknown(expr, f"the table has no set {value[1:]}")
            items = [e.key[0] for e in named.elements]
        else:
            items = [w for w in re.split(r"[\s,{}]+", value) if w]
        for item in items:
            lo, _, hi = item.partition("-")
            if not (lo.isdigit() and (hi.isdigit() or not hi)):
                return Unknown(expr, f"{item!r} is not a port number (give nft list ruleset without -S)")
            if int(lo) <= port <= int(hi or lo):
                return True
        return False

    def _ct_states(self, st: WalkState) -> set[str]:
        """The first packet's conntrack states, as nft names them."""
        return {"new"}

    def _ifname(self, which: str, negated: bool, value: str, st: WalkState) -> bool | Unknown:
        """`iifname`/`oifname` against the interface given (True: matches, False: not), else Unknown."""
        if value.startswith("@"):
            named = self.t.sets.get(value[1:])
            names = [e.key[0].strip('"') for e in named.elements] if named else []
        else:
            names = [w.strip('"') for w in re.split(r"[\s,{}]+", value) if w]
        if which in ("iifname", "iif"):
            have = "" if st.pkt.origin == "local" else st.pkt.iif
            which = "iifname"
        else:
            which = "oifname"
            have = "" if st.hook in ("prerouting", "input") else st.pkt.oif
        fact = f"{which} {value}"  # the fact is the interface's, negated or not (one fact for both rules)
        if have is None:
            known = st.fact(fact)
            if known is None:
                why = ("kpemu was not told the interface the packet arrives on (give --iif IFACE)" if which == "iifname"
                       else "kpemu was not told the interface the packet leaves by (give --oif IFACE)")
                return Unknown(fact, why)
            return known != negated
        hit = any(have.startswith(n[:-1]) if n.endswith("*") else have == n for n in names)
        return hit != negated

    def _unknown(self, rest: str) -> Unknown:
        expr = rest[:len(rest) - len(_trailing_verdict(rest))].strip()
        return Unknown(expr, f"kpemu's nft walker does not model {expr.split()[0]!r} expressions")

    # -- walking ---------------------------------------------------------------------------------
    def chain(self, name: str, st: WalkState, prob: float, depth: int = 0) -> list[tuple[float, WalkState, str]]:
        """Walk chain `name`: [(probability, state, end)], end "return" when it falls through or
        returns, else the terminal verdict (accept, drop)."""
        if depth > MAX_DEPTH:
            raise WalkLimit(f"chain {name}: jumps nest more than {MAX_DEPTH} deep (the kernel's limit)")
        return self._from(self.t.chains[name], 0, st, prob, depth)

    def _from(self, c: Chain, i: int, st: WalkState, prob: float, depth: int) -> list[tuple[float, WalkState, str]]:
        """The chain's rules from `i` on, iteratively (no recursion per rule); results in depth-first
        order, each outcome of a rule before the next outcome's."""
        out: list[tuple[float, WalkState, str]] = []
        tasks: list[tuple[int, WalkState, float] | tuple[float, WalkState, str]] = [(i, st, prob)]
        while tasks:
            task = tasks.pop()
            if isinstance(task[2], str):  # a finished outcome, kept in its place in the order
                out.append(task)  # type: ignore[arg-type]
                continue
            i, st, prob = task  # type: ignore[assignment]
            while i < len(c.rules) and not (got := self._match(c.rules[i].text, st))[0]:
                i += 1
            if i == len(c.rules):
                out.append((prob, st, "return"))
                continue
            rule = c.rules[i]
            if isinstance(got[0], Unknown):  # both ways, the rule walked again on each with the fact known
                u = got[0]
                line = f'add rule {self.name} {c.name} {rule.text}'
                tasks += [(i, replace(st, assumed=(*st.assumed, Assumption(u.fact, h, line, "", u.why))), prob)
                          for h in (False, True)]
                if len(out) + len(tasks) > MAX_OUTCOMES:
                    raise WalkLimit(f"chain {c.name}: the packet has more than {MAX_OUTCOMES:,} paths")
                continue
            results = self._action(c, rule.text, rule.comment, got[1], st, prob, depth)
            if len(out) + len(tasks) + len(results) > MAX_OUTCOMES:
                raise WalkLimit(f"chain {c.name}: the packet has more than {MAX_OUTCOMES:,} paths; kpemu's oracle "
                                "follows at most that many")
            tasks += [(i + 1, s, pr) if end == "continue" else (pr, s, end) for pr, s, end in reversed(results)]
        return out

    def _step(self, st: WalkState, chain: str, text: str, comment: str | None, verdict: str) -> tuple[Step, ...]:
        rule = NftRule(chain, text, comment, verdict, self.name)
        return (*st.steps, Step(self.step_table, chain, rule, verdict))  # type: ignore[arg-type]

    def _action(self, c: Chain, text: str, comment: str | None, action: str, st: WalkState, prob: float,
                depth: int) -> list[tuple[float, WalkState, str]]:
        # 1.37+ localhost NodePort rejects: a named counter counts, the rule goes on (as a log, a trace flag ...)
        while action and (m := _PASSING.match(action)):
            if m[1]:  # notrack: no conntrack entry, so no NAT chain sees the packet
                st = replace(st, untracked=True)
            action = action[m.end():]
        step = lambda v, s=st: self._step(s, c.name, text, comment, v)  # noqa: E731
        if not action:
            return [(prob, replace(st, steps=step("continue")), "continue")]
        m = re.match(r"numgen random mod (\d+) vmap \{ (.*) \}$", action)
        if m:
            arms = [a.split(" : ", 1)[1].strip() for a in re.split(r"\s*,\s*", m[2])]
            n = int(m[1])
            out = []
            for verdict in arms:
                out += self._verdict(c, text, comment, verdict, st, prob / n, depth)
            return out
        m = re.match(r"(?:meta )?mark set (?:meta )?mark (or|xor|\||\^) (0x[0-9a-f]+)\s*", action)  # written | listed
        if m:
            v, op = int(m[2], 16), {"|": "or", "^": "xor"}.get(m[1], m[1])
            mark = st.mark | v if op == "or" else st.mark ^ v
            marked = st.marked or (op == "or" and self.masq_bit is not None and bool(mark & self.masq_bit))
            st = replace(st, mark=mark, marked=marked)
            if m.end() < len(action):  # 1.36+: `... mark set mark xor M masquerade fully-random`
                return self._action(c, text, comment, action[m.end():], st, prob, depth)
            return [(prob, replace(st, steps=step("continue", st)), "continue")]
        m = re.match(r"meta l4proto \S+ dnat ip (?:addr \. port )?to numgen random mod (\d+) map \{ (.*) \}$", action)
        if m:  # 1.36+: the policy chain DNATs through an anonymous map, each arm 1/N (nft lists `dnat ip to`)
            out = []
            for arm in re.split(r"\s*,\s*", m[2]):
                ip, _, port = arm.split(" : ", 1)[1].partition(" . ")
                s = replace(st, steps=step("accept"), dnat=f"{ip}:{port}", endpoint_chain=c.name, dst=ip,
                            dport=int(port))
                out.append((prob / int(m[1]), s, "accept"))
            return out
        if action.startswith(("update @", "add @")):
            return [(prob, replace(st, steps=step("continue")), "continue")]
        m = re.match(r"(?:meta )?mark set (0x[0-9a-f]+|\d+)$", action)
        if m:  # another table's absolute mark
            mark = int(m[1], 0)
            marked = self.masq_bit is not None and bool(mark & self.masq_bit)
            return [(prob, replace(st, steps=step("continue", st), mark=mark, marked=marked), "continue")]
        m = re.match(r"(?:meta l4proto \S+ )?dnat (?:ip )?to ([0-9.]+(?::\d+)?)$", action)
        if m:
            ip, colon, port = m[1].rpartition(":")
            ip, dport = (ip, int(port)) if colon else (m[1], st.dport)  # `dnat to ADDR` keeps the port
            s = replace(st, steps=step("accept"), dnat=f"{ip}:{dport}", endpoint_chain=c.name, dst=ip, dport=dport)
            return [(prob, s, "accept")]
        if re.fullmatch(r"(?:masquerade|snat (?:ip )?to \S+)(?: .*)?", action):  # NAT statements end the rule: accept
            return [(prob, replace(st, steps=step("accept"), masq=True, masq_chain=c.name), "accept")]
        word = action.split(" ", 1)[0]
        if word in _UNDECIDED or word not in ("accept", "drop", "reject", "return", "continue", "jump", "goto"):
            why = _UNDECIDED.get(word, f"kpemu's nft walker does not model the statement {word!r}")
            return self._undecided(c, text, comment, action, why, st, prob)
        return self._verdict(c, text, comment, action or "continue", st, prob, depth)

    def _undecided(self, c: Chain, text: str, comment: str | None, what: str, why: str, st: WalkState,
                   prob: float) -> list[tuple[float, WalkState, str]]:
        """A statement whose outcome the walk is not given: the packet accepted one way, dropped the other."""
        fact = f"{what} lets the packet on"
        known = st.fact(fact)
        out = []
        for holds in [known] if known is not None else [True, False]:
            end = "accept" if holds else "drop"
            a = Assumption(fact, holds, f"add rule {self.name} {c.name} {text}", "", why)
            out.append((prob, replace(st, steps=self._step(st, c.name, text, comment, end),
                                      assumed=(*st.assumed, a)), end))
        return out

    def _verdict(self, c: Chain, text: str, comment: str | None, verdict: str, st: WalkState, prob: float,
                 depth: int) -> list[tuple[float, WalkState, str]]:
        nft_verdict = "drop" if verdict == "reject" else verdict
        s = replace(st, steps=self._step(st, c.name, text, comment, nft_verdict))
        word, _, target = verdict.partition(" ")
        if word in ("accept", "drop", "reject"):
            return [(prob, s, word)]
        if word == "return":
            return [(prob, s, "return")]
        if word == "continue":
            return [(prob, s, "continue")]
        if target == "mark-for-masquerade" and word == "jump":
            s = replace(s, marked=True)
        out = []
        for pr, s2, end in self.chain(target, s, prob, depth + 1):
            if end != "return":
                out.append((pr, s2, end))
            else:  # back from the callee: jump continues here, goto returns from this chain too
                out.append((pr, s2, "continue" if word == "jump" else "return"))
        return out



def _nat_done(hook: str, st: WalkState) -> bool:
    """Whether a `type nat` chain at `hook` is passed over: the connection is untracked or already has
    the NAT this hook makes (destination at prerouting and output, source at input and postrouting)."""
    return st.untracked or (st.dnat is not None if hook in ("prerouting", "output") else st.masq)


def _hook(walkers: Sequence[_Walker], hook: str, states: list[tuple[float, WalkState]],
          done: list[tuple[float, WalkState, str]]) -> list[tuple[float, WalkState]]:
    """Run every base chain of `hook` in every table by priority; a walk that falls through takes the
    chain's policy; drops and rejects go to `done`. At equal priority the chain listed later runs first:
    the kernel puts a hook it registers before the ones of its priority (nf_hook_entries_grow), and nft
    lists tables and chains in the order they were made."""
    bases = sorted(((c.hook.priority, -i, -j, w, c) for i, w in enumerate(walkers)
                    for j, c in enumerate(w.t.chains.values()) if c.hook and c.hook.hook == hook),
                   key=lambda b: b[:3])
    for _, _, _, w, base in bases:
        nxt = []
        for prob, st in states:
            if base.hook and base.hook.type == "nat" and _nat_done(hook, st):
                nxt.append((prob, st))
                continue
            if w.unread:  # its rules were not read: the packet may pass or die there
                nat = " without NAT" if base.hook and base.hook.type == "nat" else ""
                fact = f"table {w.name} chain {base.name} (hook {hook}) lets the packet on{nat}"
                known = st.fact(fact)
                for holds in [known] if known is not None else [True, False]:
                    s = replace(st, assumed=(*st.assumed, Assumption(fact, holds, f"chain {w.name} {base.name}", "",
                                                                     w.unread)))
                    (nxt.append((prob, s)) if holds else done.append((prob, s, "DROP")))
                continue
            for pr, s, end in w.chain(base.name, replace(st, hook=hook), prob):
                if end == "return" and w.policies.get(base.name, "accept") == "drop":
                    s, end = replace(s, steps=(*s.steps, Step(w.step_table, base.name, None, "POLICY:DROP"))), "drop"
                if end in ("drop", "reject"):
                    done.append((pr, s, end.upper()))
                else:
                    nxt.append((pr, s))
        states = nxt
    return states


def predict_nft(table: Table, pkt: Packet, local: Iterable[str], node: str = "",
                masq_mark: int | None = 0x4000, beside: Sequence[NftTable] = (), before: int = 0) -> Prediction:
    """All outcomes of `pkt` on a node whose kube-proxy table is `table` and whose own addresses
    are `local`; `masq_mark` is the masquerade bit (what makes `marked_masq` true); `beside` the
    node's other IPv4 tables in dump order, `before` of them listed before kube-proxy's."""
    local_set = set(local)
    kube = _Walker(table, local_set, masq_mark)
    others = [_Walker(t.table, local_set, masq_mark, t.name, t.policies, t.unread) for t in beside]
    walkers = [*others[:before], kube, *others[before:]]
    st = start(pkt)
    done: list[tuple[float, WalkState, str]] = []
    finals: list[tuple[float, WalkState, tuple[str, ...]]] = []
    if pkt.origin == "local":
        for pr, s in _hook(walkers, "postrouting", _hook(walkers, "output", [(1.0, st)], done), done):
            finals.append((pr, s, ("OUTPUT", "POSTROUTING")))
    else:
        for prob, s in _hook(walkers, "prerouting", [(1.0, st)], done):
            to_local = is_local(s.dst, local_set)
            hooks = _HOOK_ORDER["remote-local" if to_local else "remote-forward"]
            path = [(prob, s)]
            for h in hooks[1:]:
                path = _hook(walkers, h, path, done)
            finals += [(pr, x, tuple(h.upper() for h in hooks)) for pr, x in path]
    pred = Prediction(pkt, node)
    for prob, s, verdict in done:
        pred.outcomes.append(outcome(prob, s, verdict, ()))
    for prob, s, hooks in finals:
        pred.outcomes.append(outcome(prob, s, "ACCEPT", hooks))
    return pred
