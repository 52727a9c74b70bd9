"""The iptables oracle (pure): walk kube-proxy's generated iptables rules for one packet, without a kernel.

As kube-proxy's own unit tests do (pkg/proxy/iptables/proxier_test.go `tracePacket`), a packet
(source, protocol, destination, port) is walked through the netfilter hooks of one node: nat
PREROUTING (or OUTPUT for a locally generated packet), routing (INPUT when the destination,
after DNAT, is local to the node, else FORWARD), the filter chains, then nat POSTROUTING. Every
`-m statistic` rule splits the walk, so the result lists *all* outcomes with their probabilities:
the endpoint set, the DNAT targets, whether the masquerade mark is set and MASQUERADE applies.

IPVS mode: ipset membership drives the `-m set` matches and, when the destination is a virtual
server local to the node, IPVS picks one real server (every real server is an outcome) and sends
the packet on through the OUTPUT hook's filter chains and nat POSTROUTING.

The prediction vocabulary is in kpemu.analyse.oracle.types; kpemu.analyse.oracle picks this walker for
the modes whose kube-proxy state is iptables rules.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from kpemu.analyse.oracle.types import (
    MAX_OUTCOMES,
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
from kpemu.proxy.rules import BUILTIN_CHAINS, Rule, RuleSet
from kpemu.proxy.state import IpvsModel

_TERMINAL = {"ACCEPT", "DROP", "REJECT", "DNAT", "SNAT", "MASQUERADE", "REDIRECT"}
MAX_DEPTH = 32  # nested jumps the walker follows (the kernel's own check is for loops: ELOOP)


# -- matching --------------------------------------------------------------------------------------
def _port_in(value: str, port: int) -> bool:
    """`PORT` or `LO:HI` (iptables' port range) holds `port`."""
    lo, sep, hi = value.partition(":")
    return (int(lo or 0) <= port <= int(hi or 65535)) if sep else port == int(value)


def _mark_match(value: str, mark: int) -> bool:
    v, _, m = value.partition("/")
    mask = int(m, 0) if m else 0xFFFFFFFF
    return (mark & mask) == int(v, 0)


def _set_key_match(set_type: str, members: Iterable[str], flags: str, st: WalkState) -> bool:
    parts = []
    for f in flags.split(","):
        parts.append(st.src if f == "src" else st.dst)
    proto = st.pkt.proto
    kinds = set_type.split(":", 1)[1].split(",")
    if set_type.startswith("bitmap:port"):
        return str(st.dport) in set(members)
    for m in members:
        fields = m.split(",")
        if len(fields) != len(kinds):
            continue
        ok = True
        for i, (kind, want) in enumerate(zip(kinds, fields, strict=True)):
            have = parts[i] if i < len(parts) else None
            if kind == "ip":
                ok = have == want
            elif kind == "port":
                # the port of an ip,port set follows the ip's direction; kube-proxy only uses dst
                p = st.dport if flags.split(",")[min(i, len(flags.split(",")) - 1)] == "dst" else st.pkt.sport
                ok = want == f"{proto}:{p}"
            elif kind == "net":
                ok = have is not None and in_network(have, want)
            if not ok:
                break
        if ok:
            return True
    return False


def _match(rule: Rule, st: WalkState, local: set[str], ipvs: IpvsModel | None) -> float:
    """Probability that `rule` matches the packet in state `st` (0, 1, or a statistic's p)."""
    p = rule.parsed
    for o in p.base:
        v = o.values[0] if o.values else ""
        if o.name == "-s":
            ok = in_network(st.src, v)
        elif o.name == "-d":
            ok = in_network(st.dst, v)
        elif o.name == "-p":
            ok = v == st.pkt.proto
        else:  # -i/-o: kube-proxy's rules do not use them; assume they match
            ok = True
        if ok == o.negated:
            return 0.0
    prob = 1.0
    states = {"NEW"} | ({"DNAT"} if st.dnat else set())
    for m in p.matches:
        for o in m.options:
            v = o.values[0] if o.values else ""
            ok = True
            if m.module in ("tcp", "udp", "sctp") or m.implicit:
                if o.name == "--dport":
                    ok = _port_in(v, st.dport)
                elif o.name == "--sport":
                    ok = _port_in(v, st.pkt.sport)
            elif m.module == "addrtype":
                addr = st.src if o.name == "--src-type" else st.dst
                ok = is_local(addr, local) if v == "LOCAL" else not is_local(addr, local)
            elif m.module == "mark" and o.name == "--mark":
                ok = _mark_match(v, st.mark)
            elif m.module == "conntrack" and o.name == "--ctstate":
                ok = bool(states & set(v.split(",")))
            elif m.module == "statistic" and o.name == "--probability":
                prob *= float(v)
                continue
            elif m.module == "recent" and o.name in ("--rcheck", "--update"):
                ok = False  # a first connection: no affinity entry yet
            elif m.module == "physdev" and o.name == "--physdev-is-in":
                ok = st.pkt.bridged
            elif m.module == "set" and o.name == "--match-set":
                name, flags = o.values[0], o.values[1] if len(o.values) > 1 else "dst"
                if ipvs is None or name not in ipvs.sets:
                    ok = False
                else:
                    stype, members = ipvs.sets[name]
                    ok = _set_key_match(stype, members, flags, st)
            elif m.module == "ipvs":
                ok = False
            if ok == o.negated:
                return 0.0
    return prob


def _apply_mark(rule: Rule, mark: int) -> int:
    for o in rule.parsed.target_options:
        v = o.values[0] if o.values else "0"
        if o.name == "--or-mark":
            mark |= int(v, 0)
        elif o.name == "--xor-mark":
            mark ^= int(v, 0)
        elif o.name == "--and-mark":
            mark &= int(v, 0)
        elif o.name in ("--set-xmark", "--set-mark"):
            val, _, m = v.partition("/")
            mask = int(m, 0) if m else 0xFFFFFFFF
            mark = (mark & ~mask) ^ int(val, 0) if o.name == "--set-xmark" else (mark & ~mask) | int(val, 0)
    return mark & 0xFFFFFFFF


# -- walking ---------------------------------------------------------------------------------------
class _Walker:
    def __init__(self, rs: RuleSet, local: set[str], ipvs: IpvsModel | None):
        self.rs, self.local, self.ipvs = rs, local, ipvs

    def chain(self, table: str, chain: str, st: WalkState, prob: float,
              depth: int = 0) -> list[tuple[float, WalkState, str]]:
        """Walk one chain: [(probability, state, verdict)], verdict RETURN when it falls through."""
        if depth > MAX_DEPTH:
            raise WalkLimit(f"chain {table}/{chain}: jumps nest more than {MAX_DEPTH} deep (a rule loop?)")
        rules = self.rs.rules(table, chain)
        return self._from(table, chain, rules, 0, st, prob, depth)

    def _from(self, table: str, chain: str, rules: list[Rule], i: int, st: WalkState, prob: float,
              depth: int) -> list[tuple[float, WalkState, str]]:
        """The chain's rules from `i` on, iteratively (a statistic rule splits the walk without
        recursion); the results come in depth-first order, the branch that did not match first."""
        out: list[tuple[float, WalkState, str]] = []
        tasks: list[tuple[int, WalkState, float] | list[tuple[float, WalkState, str]]] = [(i, st, prob)]
        while tasks:
            task = tasks.pop()
            if isinstance(task, list):
                out += task
                continue
            i, st, prob = task
            while i < len(rules) and (p := _match(rules[i], st, self.local, self.ipvs)) <= 0.0:
                i += 1
            if i == len(rules):
                out.append((prob, st, "RETURN"))
                continue
            after: list = []  # run in this order: the no-match branch, the verdicts, the continuations
            if p < 1.0:
                after.append((i + 1, st, prob * (1 - p)))
                prob *= p
            results = self._target(table, chain, rules[i], st, prob, depth)
            after.append([(pr, s, v) for pr, s, v in results if v not in ("CONTINUE", "RETURN-FROM-CALLEE")])
            cont = [(i + 1, s, pr) for pr, s, v in results if v in ("CONTINUE", "RETURN-FROM-CALLEE")]
            after += cont[1:] + cont[:1]
            if len(out) + len(tasks) + len(after) > MAX_OUTCOMES:
                raise WalkLimit(f"chain {table}/{chain}: the packet has more than {MAX_OUTCOMES:,} paths (statistic "
                                "rules that do not end the walk); kpemu's oracle follows at most that many")
            tasks += reversed(after)
        return out

    def _target(self, table: str, chain: str, rule: Rule, st: WalkState, prob: float,
                depth: int) -> list[tuple[float, WalkState, str]]:
        t = rule.target
        step = lambda verdict: (*st.steps, Step(table, chain, rule, verdict))  # noqa: E731
        if t is None or t in ("TRACE", "LOG", "NFLOG"):
            return [(prob, replace(st, steps=step("CONTINUE")), "CONTINUE")]
        if t == "MARK":
            return [(prob, replace(st, steps=step("MARK"), mark=_apply_mark(rule, st.mark)), "CONTINUE")]
        if t == "RETURN":
            return [(prob, replace(st, steps=step("RETURN")), "RETURN")]
        if t == "DNAT":
            to = rule.parsed.dnat_to or ""
            ip, _, port = to.partition(":")  # a range (a-b:p-q) DNATs to its first address and port
            ip, port = ip.split("-")[0], port.split("-")[0]
            s = replace(st, steps=step("DNAT"), dnat=to, endpoint_chain=chain, dst=ip,
                        dport=int(port) if port else st.dport)
            return [(prob, s, "ACCEPT")]
        if t in ("MASQUERADE", "SNAT"):
            return [(prob, replace(st, steps=step(t), masq=True, masq_chain=chain), "ACCEPT")]
        if t in _TERMINAL:
            return [(prob, replace(st, steps=step(t)), t)]
        # a user chain
        s = replace(st, steps=step(f"JUMP:{t}"), marked=st.marked or t == "KUBE-MARK-MASQ")
        out = []
        for pr, s2, v in self.chain(table, t, s, prob, depth + 1):
            out.append((pr, s2, "RETURN-FROM-CALLEE" if v == "RETURN" else v))
        return out

    def builtin(self, table: str, chain: str,
                states: list[tuple[float, WalkState]]) -> list[tuple[float, WalkState, str]]:
        """Walk a built-in chain for each state; a fall-through takes the policy (ACCEPT)."""
        out = []
        for prob, st in states:
            if table not in self.rs.tables or chain not in self.rs.tables[table].chains:
                out.append((prob, st, "ACCEPT"))
                continue
            for pr, s, v in self.chain(table, chain, st, prob):
                if v == "RETURN":
                    s = replace(s, steps=(*s.steps, Step(table, chain, None, "POLICY")))
                    v = "ACCEPT"
                out.append((pr, s, v))
        return out


def _hook(w: _Walker, hook: str, tables: tuple[str, ...], states: list[tuple[float, WalkState]],
          done: list[tuple[float, WalkState, str, tuple[str, ...]]], hooks: dict[int, tuple[str, ...]]) -> list:
    for table in tables:
        if table not in BUILTIN_CHAINS or hook not in BUILTIN_CHAINS[table]:
            continue
        res = w.builtin(table, hook, states)
        states = []
        for pr, s, v in res:
            if v in ("DROP", "REJECT"):
                done.append((pr, s, v, hooks.get(id(s), ())))
            else:
                states.append((pr, s))
    return states


def predict(rs: RuleSet, pkt: Packet, local: Iterable[str], node: str = "",
            ipvs: IpvsModel | None = None) -> Prediction:
    """All outcomes of `pkt` on a node with rule set `rs` whose own addresses are `local`."""
    local_set = set(local)
    w = _Walker(rs, local_set, ipvs)
    st = start(pkt)
    done: list[tuple[float, WalkState, str, tuple[str, ...]]] = []
    pre = "OUTPUT" if pkt.origin == "local" else "PREROUTING"
    states = _hook(w, pre, ("raw", "mangle", "nat"), [(1.0, st)], done, {})
    if pkt.origin == "local":
        states = _hook(w, "OUTPUT", ("filter",), states, done, {})
    finals: list[tuple[float, WalkState, tuple[str, ...]]] = []
    for prob, s in states:
        to_local = is_local(s.dst, local_set)
        if pkt.origin == "local":
            path = [(prob, s)]
            hooks = ("OUTPUT",)
        elif to_local:
            hooks = ("PREROUTING", "INPUT")
            path = _hook(w, "INPUT", ("mangle", "nat", "filter"), [(prob, s)], done, {})
            path = _ipvs(path, ipvs)
            if path and path[0][1].ipvs is None:  # delivered locally, nothing forwards it
                finals += [(pr, x, hooks) for pr, x in path]
                continue
            # IPVS sends the real-server packet through LOCAL_OUT (ip_vs_xmit.c, NF_HOOK(NF_INET_LOCAL_OUT));
            # nat OUTPUT is not consulted again: the connection's destination NAT was set up in PREROUTING.
            path = _hook(w, "OUTPUT", ("raw", "mangle", "filter"), path, done, {})
            hooks = (*hooks, "OUTPUT", "POSTROUTING")
        else:
            hooks = ("PREROUTING", "FORWARD", "POSTROUTING")
            path = _hook(w, "FORWARD", ("mangle", "filter"), [(prob, s)], done, {})
        for pr, x in path:
            x = replace(x, post_mark=x.mark)
            for pr2, y, _v in w.builtin("nat", "POSTROUTING", [(pr, x)]):
                finals.append((pr2, y, hooks if pkt.origin != "local" else ("OUTPUT", "POSTROUTING")))
    pred = Prediction(pkt, node)
    for prob, s, v, _ in done:
        pred.outcomes.append(outcome(prob, s, v, ("PREROUTING",)))
    for prob, s, hooks in finals:
        pred.outcomes.append(outcome(prob, s, "ACCEPT", hooks))
    return pred


def _ipvs(path: list[tuple[float, WalkState]], ipvs: IpvsModel | None) -> list[tuple[float, WalkState]]:
    """IPVS in LOCAL_IN: a virtual server for (proto, dst, dport) picks each real server."""
    if ipvs is None:
        return path
    out = []
    for prob, s in path:
        vs = next((v for v in ipvs.virtual_servers if v.protocol.lower() == s.pkt.proto
                   and v.address == s.dst and v.port == s.dport), None)
        if vs is None or not vs.real_servers:
            out.append((prob, s))
            continue
        n = len(vs.real_servers)
        for r in vs.real_servers:
            to = f"{r.address}:{r.port}"
            desc = f"IPVS {vs.scheduler} {vs.protocol} {vs.address}:{vs.port} -> {to}"
            out.append((prob / n, replace(s, dnat=to, dst=r.address, dport=r.port, ipvs=desc)))
    return out
