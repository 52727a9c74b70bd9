"""Restore input -> the canonical text `iptables-save` prints back (reference section 2.10).

Canonicalisation per rule: base matches first (`[!] -s`, `[!] -d`, `-i`, `-o`, `-p`) with host
addresses as /32, then every `-m` match in the order written (an implicit protocol match becomes
`-m tcp`), each with its options in the order the extension's save() prints them, then `-j` and
the target's options (MARK -> --set-xmark, REJECT -> --reject-with icmp-port-unreachable,
statistic probability round-tripped through the kernel's lround(p * 2^31)).

Table layout: built-in chains first, then user chains alphabetically, rules grouped in that chain
order. Verified against iptables v1.8.9 in a scratch netns: iptables-legacy-save and
iptables-nft-save both sort user chains by name (nft-save sorts them itself), so `backend` only
matters for older nft-save releases that listed chains in creation order (`backend="nft-creation"`).
Table order differs (legacy: by module load; nft 1.8.9 printed mangle, filter, nat); compare
per table.
"""

from __future__ import annotations

import functools
import ipaddress

from kpemu.proxy.rules import (
    BUILTIN_CHAINS,
    Match,
    Option,
    ParsedRule,
    Rule,
    RuleSet,
    parse_args,
    parse_rule_line,
    split_line,
)


def _hex(v: str) -> str:
    return hex(int(v, 16)) if v.lower().startswith("0x") else hex(int(v))


def _mark(v: str) -> str:
    """0x00004000/0x00004000 -> 0x4000/0x4000 (as the kernel hands it back)."""
    return "/".join(_hex(x) for x in v.split("/"))


def _addr(v: str) -> str:
    net = ipaddress.ip_network(v, strict=False)
    return f"{net.network_address}/{net.prefixlen}"


def probability(p: str) -> str:
    """The probability iptables-save prints for `p`: lround(p * 2^31) / 2^31 as %.11f."""
    v = int(float(p) * 2**31 + 0.5)
    return f"{v / 2**31:.11f}"


def _neg(o: Option) -> list[str]:
    return ["!"] if o.negated else []


def _quote(v: str) -> str:
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _match(m: Match) -> list[str]:
    out = ["-m", m.module]
    opts = list(m.options)
    if m.module == "comment":
        for o in opts:
            out += [*_neg(o), "--comment", _quote(o.values[0])]
    elif m.module == "mark":
        for o in opts:
            out += [*_neg(o), "--mark", _mark(o.values[0])]
    elif m.module == "statistic":
        mode = next((o for o in opts if o.name == "--mode"), None)
        out += ["--mode", mode.values[0] if mode else "random"]
        for o in opts:
            if o.name == "--probability":
                out += [*_neg(o), "--probability", probability(o.values[0])]
            elif o.name in ("--every", "--packet"):
                out += [*_neg(o), o.name, *o.values]
    elif m.module == "recent":
        action = next(o for o in opts if o.name in ("--set", "--rcheck", "--update", "--remove"))
        out += [*_neg(action), action.name]
        for name in ("--seconds", "--reap", "--hitcount", "--rttl"):
            out += [x for o in opts if o.name == name for x in (o.name, *o.values)]
        name = next((o.values[0] for o in opts if o.name == "--name"), "DEFAULT")
        mask = next((o.values[0] for o in opts if o.name == "--mask"), "255.255.255.255")
        side = "--rdest" if any(o.name == "--rdest" for o in opts) else "--rsource"
        out += ["--name", name, "--mask", mask, side]
    elif m.module == "addrtype":
        for name in ("--src-type", "--dst-type", "--limit-iface-in", "--limit-iface-out"):
            out += [x for o in opts if o.name == name for x in (*_neg(o), o.name, *o.values)]
    elif m.module == "nfacct":
        # libxt_nfacct prints "--nfacct-name  NAME" (two spaces); kept as one token.
        out += [f"--nfacct-name  {o.values[0]}" for o in opts if o.name == "--nfacct-name"]
    elif m.module == "ipvs":
        # libxt_ipvs's save: --ipvs, --vproto as a number, --vaddr, --vport, --vdir, --vmethod, --vportctl
        protos = {"tcp": "6", "udp": "17", "sctp": "132"}
        for name in ("--ipvs", "--vproto", "--vaddr", "--vport", "--vdir", "--vmethod", "--vportctl"):
            out += [x for o in opts if o.name == name
                    for x in (*_neg(o), o.name, *(protos.get(v, v) if name == "--vproto" else v for v in o.values))]
    elif m.module in ("tcp", "udp", "sctp"):
        for name in ("--sport", "--source-port", "--dport", "--destination-port"):
            canon = {"--source-port": "--sport", "--destination-port": "--dport"}.get(name, name)
            out += [x for o in opts if o.name == name for x in (*_neg(o), canon, *o.values)]
    else:
        for o in opts:
            out += [*_neg(o), o.name, *o.values]
    return out


def _target(p: ParsedRule) -> list[str]:
    if p.target is None:
        return []
    t, opts = p.target, list(p.target_options)
    out = ["-j", t]
    if t == "MARK":
        o = opts[0]
        v = o.values[0]
        if o.name == "--or-mark":
            out += ["--set-xmark", f"{_hex(v)}/{_hex(v)}"]
        elif o.name == "--xor-mark":
            out += ["--set-xmark", f"{_hex(v)}/0x0"]
        elif o.name == "--and-mark":
            out += ["--set-xmark", f"0x0/{hex(~int(v, 16) & 0xFFFFFFFF)}"]
        elif o.name == "--set-mark":
            val, _, mask = v.partition("/")
            out += ["--set-xmark", f"{_hex(val)}/{_hex(mask) if mask else '0xffffffff'}"]
        else:
            val, _, mask = v.partition("/")
            out += ["--set-xmark", f"{_hex(val)}/{_hex(mask) if mask else '0xffffffff'}"]
        return out
    if t == "REJECT" and not opts:
        return [*out, "--reject-with", "icmp-port-unreachable"]
    for o in opts:
        out += [*_neg(o), o.name, *o.values]
    return out


def canonical_args(args: tuple[str, ...] | list[str]) -> list[str]:
    """The tokens iptables-save prints after `-A CHAIN` for a rule written as `args`."""
    p = parse_args(args)
    out: list[str] = []
    for flag in ("-s", "-d", "-i", "-o", "-p", "-f"):
        for o in p.base:
            if o.name == flag:
                vals = [_addr(v) for v in o.values] if flag in ("-s", "-d") else list(o.values)
                out += [*_neg(o), flag, *vals]
    for m in p.matches:
        out += _match(m)
    return out + _target(p)


def canonical_line(rule: Rule) -> str:
    """`-A CHAIN ...` exactly as iptables-save prints it."""
    return _canonical_line(rule.chain, tuple(rule.args))


@functools.lru_cache(maxsize=1 << 16)
def _canonical_line(chain: str, args: tuple[str, ...]) -> str:
    # remembered: most of a lab's rules are the same on every node (a 48-node lab: 218,000 lines, 4,500 distinct)
    return " ".join(["-A", chain, *canonical_args(args)])


def save_text(rs: RuleSet, backend: str = "legacy", tables: tuple[str, ...] = ("nat", "filter", "mangle")) -> str:
    """The rule set as iptables-save prints it (no '#' header/footer lines, counters [0:0]).

    Only the chains in `rs` appear; built-in chains are always listed (policy ACCEPT).
    """
    out: list[str] = []
    for name in tables:
        t = rs.tables.get(name)
        if t is None:
            continue
        out.append(f"*{name}")
        builtins = BUILTIN_CHAINS.get(name, ())
        out.extend(f":{b} ACCEPT [0:0]" for b in builtins)
        users = [c.name for c in t.user_chains]
        if backend != "nft-creation":
            users = sorted(users)
        out.extend(f":{c} - [0:0]" for c in users)
        for cname in [*builtins, *users]:
            if cname in t.chains:
                out.extend(canonical_line(r) for r in t.chains[cname].rules)
        out.append("COMMIT")
    return "\n".join(out) + "\n"


def rule_lines(save: str) -> dict[str, list[str]]:
    """`-A` lines of a save/restore text grouped per "table/chain", in order."""
    out: dict[str, list[str]] = {}
    table = ""
    for line in save.splitlines():
        if line.startswith("*"):
            table = line[1:].strip()
        elif line.startswith("-A "):
            chain = line.split()[1]
            out.setdefault(f"{table}/{chain}", []).append(line.rstrip())
    return out


def ruleset_from_restore(text: str) -> RuleSet:
    """Parse restore input (or iptables-save output) back into a RuleSet.

    `-I CHAIN 1 ...` lines are applied as prepends, so the result holds the final chain order.
    """
    rs = RuleSet()
    table = None
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#") or line == "COMMIT":
            continue
        if line.startswith("*"):
            table = rs.table(line[1:])
        elif table is None:
            raise ValueError(f"rule outside a table: {line!r}")
        elif line.startswith(":"):
            table.chain(line[1:].split()[0])
        elif line.startswith("-A "):
            r = parse_rule_line(line)
            table.add(r.chain, *r.args)
        elif line.startswith("-I "):
            toks = split_line(line)
            chain, rest = toks[1], toks[2:]
            pos = int(rest[0]) if rest and rest[0].isdigit() else 1
            rest = rest[1:] if rest and rest[0].isdigit() else rest
            table.chain(chain).rules.insert(pos - 1, Rule(chain, tuple(rest)))
    return rs
