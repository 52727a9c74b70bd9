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
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

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
                     r"meta l4proto \. th dport vmap )")
_VERDICT_TAIL = re.compile(r"(?:^|\s)((?:accept|drop|return|continue|reject(?: with .*)?|(?:jump|goto) \S+))$")


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
    verdict it gave (`target`, as `nft monitor trace` prints it)."""

    chain: str
    text: str
    comment: str | None
    target: str

    def restore_line(self) -> str:
        """The rule as kube-proxy's transaction line (what reports quote)."""
        tail = f' comment "{self.comment}"' if self.comment else ""
        return f"add rule ip {TABLE} {self.chain} {self.text}{tail}"


class _Walker:
    def __init__(self, table: Table, local: set[str], masq_bit: int | None):
        self.t, self.local, self.masq_bit = table, local, masq_bit

    # -- matches ---------------------------------------------------------------------------------
    def _lookup(self, name: str, key: tuple[str, ...]) -> str | None:
        s = self.t.sets.get(name)
        if s is None:
            return None
        return next((e.value for e in s.elements if e.key == key), None)

    def _in_set(self, name: str, addr: str) -> bool:
        s = self.t.sets.get(name)
        return s is not None and any(in_network(addr, e.key[0]) for e in s.elements)

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
                hit = any(in_network(self._addr(st, m[1]), c) for c in m[3].split(","))
                if hit == bool(m[2]):
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"ip ([sd])addr (!= )?([0-9./]+)\s*", rest)
            if m:
                if in_network(self._addr(st, m[1]), m[3]) == bool(m[2]):
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"fib ([sd])addr type local\s*", rest)
            if m:
                if self._addr(st, m[1]) not in self.local:
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"(tcp|udp|sctp) dport (\d+)\s*", rest)
            if m:
                if (m[1], int(m[2])) != (st.pkt.proto, st.dport):
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"(?:mark and|meta mark &) (0x[0-9a-f]+) (==|!=) (?:0x)?0+\s*", rest)  # written | listed
            if m:
                if bool(st.mark & int(m[1], 16)) != (m[2] == "!="):
                    return False, ""
                rest = rest[m.end():]
                continue
            m = re.match(r"counter(?: packets \d+ bytes \d+)?\s*", rest)
            if m and m.end():
                rest = rest[m.end():]
                continue
            m = re.match(r"(iifname|oifname) (!= )?(\{ [^}]* \}|\S+)\s*", rest)
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
            return self._unknown(rest), _trailing_verdict(rest)
        return True, ""

    def _ct_states(self, st: WalkState) -> set[str]:
        """The first packet's conntrack states, as nft names them."""
        return {"new"}

    def _ifname(self, which: str, negated: bool, value: str, st: WalkState) -> bool | Unknown:
        """`iifname`/`oifname` against the interface given (True: matches, False: not), else Unknown."""
        names = [w.strip('"') for w in re.split(r"[\s,{}]+", value) if w]
        if which == "iifname":
            have = "" if st.pkt.origin == "local" else st.pkt.iif
        else:
            have = "" if st.hook in ("prerouting", "input") else st.pkt.oif
        fact = f"{which} {'!= ' if negated else ''}{value}"
        if have is None:
            known = st.fact(fact)
            if known is None:
                why = ("kpemu was not told the interface the packet arrives on (give --iif IFACE)" if which == "iifname"
                       else "kpemu was not told the interface the packet leaves by (give --oif IFACE)")
                return Unknown(fact, why)
            return known
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
            if isinstance(got[0], Unknown):  # both ways, each remembered for the rest of this path
                u = got[0]
                line = f'add rule ip {TABLE} {c.name} {rule.text}'
                yes, no = (replace(st, assumed=(*st.assumed, Assumption(u.fact, h, line, "", u.why)))
                           for h in (True, False))
                known = st.fact(u.fact)
                if known is None:
                    tasks += [(i + 1, no, prob)]
                    if len(out) + len(tasks) > MAX_OUTCOMES:
                        raise WalkLimit(f"chain {c.name}: the packet has more than {MAX_OUTCOMES:,} paths")
                    st = yes
                elif not known:
                    tasks.append((i + 1, st, prob))
                    continue
                got = (True, got[1])
            results = self._action(c, rule.text, rule.comment, got[1], st, prob, depth)
            if len(out) + len(tasks) + len(results) > MAX_OUTCOMES:
                raise WalkLimit(f"chain {c.name}: the packet has more than {MAX_OUTCOMES:,} paths; kpemu's oracle "
                                "follows at most that many")
            tasks += [(i + 1, s, pr) if end == "continue" else (pr, s, end) for pr, s, end in reversed(results)]
        return out

    def _step(self, st: WalkState, chain: str, text: str, comment: str | None, verdict: str) -> tuple[Step, ...]:
        return (*st.steps, Step(TABLE, chain, NftRule(chain, text, comment, verdict), verdict))  # type: ignore[arg-type]

    def _action(self, c: Chain, text: str, comment: str | None, action: str, st: WalkState, prob: float,
                depth: int) -> list[tuple[float, WalkState, str]]:
        step = lambda v, s=st: self._step(s, c.name, text, comment, v)  # noqa: E731
        m = re.match(r'counter name "[^"]*"\s*', action)
        if m:  # 1.37+ localhost NodePort rejects: a named counter counts, the rule goes on
            action = action[m.end():]
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
        if action.startswith("update @"):
            return [(prob, replace(st, steps=step("continue")), "continue")]
        m = re.match(r"meta l4proto \S+ dnat to (\S+)$", action)
        if m:
            ip, colon, port = m[1].rpartition(":")
            ip, dport = (ip, int(port)) if colon else (m[1], st.dport)  # `dnat to ADDR` keeps the port
            s = replace(st, steps=step("accept"), dnat=f"{ip}:{dport}", endpoint_chain=c.name, dst=ip, dport=dport)
            return [(prob, s, "accept")]
        if action == "masquerade fully-random":
            return [(prob, replace(st, steps=step("accept"), masq=True, masq_chain=c.name), "accept")]
        return self._verdict(c, text, comment, action or "continue", st, prob, depth)

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

    def hook(self, hook: str, states: list[tuple[float, WalkState]],
             done: list[tuple[float, WalkState, str]]) -> list[tuple[float, WalkState]]:
        """Run every base chain of `hook` by priority; drops and rejects go to `done`."""
        bases = sorted((c for c in self.t.chains.values() if c.hook and c.hook.hook == hook),
                       key=lambda c: c.hook.priority if c.hook else 0)
        for base in bases:
            nxt = []
            for prob, st in states:
                for pr, s, end in self.chain(base.name, replace(st, hook=hook), prob):
                    if end in ("drop", "reject"):
                        done.append((pr, s, end.upper()))
                    else:
                        nxt.append((pr, s))
            states = nxt
        return states


def predict_nft(table: Table, pkt: Packet, local: Iterable[str], node: str = "",
                masq_mark: int | None = 0x4000) -> Prediction:
    """All outcomes of `pkt` on a node whose kube-proxy table is `table` and whose own addresses
    are `local`; `masq_mark` is the masquerade bit (what makes `marked_masq` true)."""
    local_set = set(local)
    w = _Walker(table, local_set, masq_mark)
    st = start(pkt)
    done: list[tuple[float, WalkState, str]] = []
    finals: list[tuple[float, WalkState, tuple[str, ...]]] = []
    if pkt.origin == "local":
        for pr, s in w.hook("postrouting", w.hook("output", [(1.0, st)], done), done):
            finals.append((pr, s, ("OUTPUT", "POSTROUTING")))
    else:
        for prob, s in w.hook("prerouting", [(1.0, st)], done):
            to_local = is_local(s.dst, local_set)
            hooks = _HOOK_ORDER["remote-local" if to_local else "remote-forward"]
            path = [(prob, s)]
            for h in hooks[1:]:
                path = w.hook(h, path, done)
            finals += [(pr, x, tuple(h.upper() for h in hooks)) for pr, x in path]
    pred = Prediction(pkt, node)
    for prob, s, verdict in done:
        pred.outcomes.append(outcome(prob, s, verdict, ()))
    for prob, s, hooks in finals:
        pred.outcomes.append(outcome(prob, s, "ACCEPT", hooks))
    return pred
