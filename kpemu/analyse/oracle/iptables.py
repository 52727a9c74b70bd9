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
    Assumption,
    Packet,
    Prediction,
    Route,
    Step,
    WalkLimit,
    WalkState,
    is_local,
    outcome,
    start,
)
from kpemu.analyse.oracle.xtmatch import Context, Unknown, evaluate, out_interface
from kpemu.proxy.rules import BUILTIN_CHAINS, Rule, RuleSet
from kpemu.proxy.state import IpvsModel

_TERMINAL = {"ACCEPT", "DROP", "REJECT", "DNAT", "SNAT", "MASQUERADE", "REDIRECT"}
# targets that change nothing the walk looks at, and let the packet go on to the next rule
_CONTINUE = frozenset(("TRACE", "LOG", "NFLOG", "ULOG", "TCPMSS", "TCPOPTSTRIP", "CHECKSUM", "CLASSIFY", "DSCP",
                       "TOS", "TTL", "HL", "ECN", "SECMARK", "CONNSECMARK", "AUDIT", "LED", "IDLETIMER", "RATEEST",
                       "TEE", "SET"))
# targets whose verdict is another program's or depends on what the walk is not given: accept or drop
_UNDECIDED_VERDICT = {"QUEUE": "a userspace program decides the verdict", "NFQUEUE": "a userspace program "
                      "decides the verdict", "TPROXY": "it depends on a local socket for the packet",
                      "SYNPROXY": "SYNPROXY answers the SYN itself", "NETMAP": "kpemu does not model NETMAP",
                      "CLUSTERIP": "kpemu does not model CLUSTERIP", "HMARK": "the mark is a hash of the packet"}
MAX_DEPTH = 32  # nested jumps the walker follows (the kernel's own check is for loops: ELOOP)


# -- matching: kpemu.analyse.oracle.xtmatch -------------------------------------------------------
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
    def __init__(self, rs: RuleSet, ctx: Context):
        self.rs, self.ctx = rs, ctx
        self.local, self.ipvs = set(ctx.local), ctx.ipvs

    def chain(self, table: str, chain: str, st: WalkState, prob: float,
              depth: int = 0) -> list[tuple[float, WalkState, str]]:
        """Walk one chain: [(probability, state, verdict)], verdict RETURN when it falls through."""
        if depth > MAX_DEPTH:
            raise WalkLimit(f"chain {table}/{chain}: jumps nest more than {MAX_DEPTH} deep (a rule loop?)")
        rules = self.rs.rules(table, chain)
        return self._from(table, chain, rules, 0, st, prob, depth)

    def _inferred(self, rule: Rule, st: WalkState) -> WalkState:
        """The state with what the walk inferred to decide `rule`'s -o (once per path)."""
        if not any(o.name == "-o" for o in rule.parsed.base):
            return st
        _, why = out_interface(st, self.ctx)
        if why is None or why in st.inferred:
            return st
        return replace(st, inferred=(*st.inferred, why))

    def _from(self, table: str, chain: str, rules: list[Rule], i: int, st: WalkState, prob: float,
              depth: int) -> list[tuple[float, WalkState, str]]:
        """The chain's rules from `i` on, iteratively (a statistic rule, or one the walk cannot decide,
        splits the walk without recursion); the results come in depth-first order, the branch that did
        not match first."""
        out: list[tuple[float, WalkState, str]] = []
        tasks: list[tuple[int, WalkState, float] | list[tuple[float, WalkState, str]]] = [(i, st, prob)]
        while tasks:
            task = tasks.pop()
            if isinstance(task, list):
                out += task
                continue
            i, st, prob = task
            p: float | Unknown = 0.0
            while i < len(rules):
                st = self._inferred(rules[i], st)
                p = evaluate(rules[i], st, self.ctx)
                if isinstance(p, Unknown) or p > 0.0:
                    break
                i += 1
            if i == len(rules):
                out.append((prob, st, "RETURN"))
                continue
            if isinstance(p, Unknown):  # both ways, each remembered for the rest of this path
                rule = rules[i]
                where = f"line {rule.line}" if rule.line else ""
                yes, no = (replace(st, assumed=(*st.assumed, Assumption(p.fact, h, rule.restore_line(), where,
                                                                           p.why))) for h in (True, False))
                tasks += [(i, no, prob), (i, yes, prob)]
                if len(out) + len(tasks) > MAX_OUTCOMES:
                    raise WalkLimit(f"chain {table}/{chain}: the packet has more than {MAX_OUTCOMES:,} paths; "
                                    "kpemu's oracle follows at most that many")
                continue
            after: list = []  # run in this order: the no-match branch, the verdicts, the continuations
            if p < 1.0:
                after.append((i + 1, st, prob * (1 - p)))
                prob *= p
            results = self._target(table, chain, rules[i], _effects(rules[i], st), prob, depth)
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
        if t is None or t in _CONTINUE:
            return [(prob, replace(st, steps=step("CONTINUE")), "CONTINUE")]
        if t == "MARK":
            return [(prob, replace(st, steps=step("MARK"), mark=_apply_mark(rule, st.mark)), "CONTINUE")]
        if t == "CONNMARK":
            return [(prob, _connmark(rule, replace(st, steps=step("CONNMARK"))), "CONTINUE")]
        if t in ("NOTRACK", "CT"):
            notrack = t == "NOTRACK" or any(o.name == "--notrack" for o in rule.parsed.target_options)
            return [(prob, replace(st, steps=step(t), untracked=st.untracked or notrack), "CONTINUE")]
        if t == "RETURN":
            return [(prob, replace(st, steps=step("RETURN")), "RETURN")]
        if t == "DNAT":
            to = rule.parsed.dnat_to or ""
            ips, _, ports = to.partition(":")
            ip, port = ips.split("-")[0], ports.split("-")[0]
            s = replace(st, steps=step("DNAT"), dnat=to, endpoint_chain=chain, dst=ip,
                        dport=int(port) if port.isdigit() else st.dport)
            if "-" in to:  # a range: the kernel picks in it (a hash of the connection, or its own port if inside)
                s = replace(s, assumed=(*s.assumed, Assumption(
                    f"-j DNAT --to-destination {to} picks {ip}:{port or st.dport}", True, rule.restore_line(),
                    f"line {rule.line}" if rule.line else "", "the kernel chooses the address and port in the "
                    "range per connection; the walk follows the first of each")))
            return [(prob, s, "ACCEPT")]
        if t in ("MASQUERADE", "SNAT"):
            return [(prob, replace(st, steps=step(t), masq=True, masq_chain=chain), "ACCEPT")]
        if t in _UNDECIDED_VERDICT:
            where = f"line {rule.line}" if rule.line else ""
            fact = f"-j {t} lets the packet on"
            known = st.fact(fact)
            ends = [known] if known is not None else [True, False]
            return [(prob, replace(st, steps=step(t), assumed=(*st.assumed, Assumption(
                fact, h, rule.restore_line(), where, _UNDECIDED_VERDICT[t]))), "ACCEPT" if h else "DROP")
                for h in ends]
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
        """Walk a built-in chain for each state; a fall-through takes the chain's policy."""
        out = []
        for prob, st in states:
            st = replace(st, hook=chain)
            if table not in self.rs.tables or chain not in self.rs.tables[table].chains:
                out.append((prob, st, "ACCEPT"))
                continue
            if table == "nat" and st.untracked:  # no conntrack entry: the nat table never sees the packet
                out.append((prob, st, "ACCEPT"))
                continue
            policy = self.rs.tables[table].chains[chain].policy
            for pr, s, v in self.chain(table, chain, st, prob):
                if v == "RETURN":
                    s = replace(s, steps=(*s.steps, Step(table, chain, None, f"POLICY:{policy}")))
                    v = policy
                out.append((pr, s, v))
        return out


def _effects(rule: Rule, st: WalkState) -> WalkState:
    """What a matched rule's matches do besides matching: `-m recent --set` adds the address."""
    m = rule.parsed.match("recent")
    if m is None or m.get("--set") is None:
        return st
    name_opt = m.get("--name")
    name = name_opt.values[0] if name_opt and name_opt.values else "DEFAULT"
    addr = st.dst if m.get("--rdest") else st.src
    return replace(st, recent=st.recent | {(name, addr)})


def _connmark(rule: Rule, st: WalkState) -> WalkState:
    """CONNMARK: --set-xmark/--set-mark on the connection's mark, --save-mark / --restore-mark between the two."""
    for o in rule.parsed.target_options:
        v = o.values[0] if o.values else "0"
        val, _, m = v.partition("/")
        mask = int(m, 0) if m else 0xFFFFFFFF
        if o.name in ("--set-xmark", "--set-mark"):
            ct = (st.ctmark & ~mask) ^ int(val, 0) if o.name == "--set-xmark" else (st.ctmark & ~mask) | int(val, 0)
            st = replace(st, ctmark=ct & 0xFFFFFFFF)
        elif o.name == "--save-mark":
            st = replace(st, ctmark=st.mark)
        elif o.name == "--restore-mark":
            st = replace(st, mark=st.ctmark)
    return st


def _hook(w: _Walker, hook: str, tables: tuple[str, ...], states: list[tuple[float, WalkState]],
          done: list[tuple[float, WalkState, str, tuple[str, ...]]], hooks: dict[int, tuple[str, ...]]) -> list:
    for table in tables:
        if table not in BUILTIN_CHAINS or hook not in BUILTIN_CHAINS[table]:
            continue
        res = w.builtin(table, hook, states)
        states = []
        for pr, s, v in res:
            if v in ("DROP", "REJECT", "UNDECIDED"):
                done.append((pr, s, v, hooks.get(id(s), ())))
            else:
                states.append((pr, s))
    return states


def predict(rs: RuleSet, pkt: Packet, local: Iterable[str], node: str = "",
            ipvs: IpvsModel | None = None, routes: tuple[Route, ...] = ()) -> Prediction:
    """All outcomes of `pkt` on a node with rule set `rs` whose own addresses are `local`; `routes`
    say where destinations leave the node (for `-o`, when the packet's own `oif` is not given)."""
    local_set = set(local)
    w = _Walker(rs, Context(frozenset(local_set), ipvs, routes))
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
        pred.outcomes.append(outcome(prob, s, v, _hooks_to(s, pkt.origin)))
    for prob, s, hooks in finals:
        pred.outcomes.append(outcome(prob, s, "ACCEPT", hooks))
    return pred


def _hooks_to(s: WalkState, origin: str) -> tuple[str, ...]:
    """The hooks a packet that ended at `s.hook` went through."""
    if origin == "local":
        return ("OUTPUT",) if s.hook == "OUTPUT" else ("OUTPUT", "POSTROUTING")
    path = {"PREROUTING": ("PREROUTING",), "INPUT": ("PREROUTING", "INPUT"), "FORWARD": ("PREROUTING", "FORWARD"),
            "OUTPUT": ("PREROUTING", "INPUT", "OUTPUT")}
    return path.get(s.hook, ("PREROUTING",))


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
