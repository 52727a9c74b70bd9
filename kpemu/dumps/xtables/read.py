"""Read a node's dumps strictly: every line must be one `iptables-save` / `ipvsadm -Sn` /
`ipset save` prints, and a dump cut short is an error naming the file and line (exit 2).

The rules are parsed by the same code that reads kpemu's own generated rules
(kpemu.proxy.save / rules), so a real dump and a generated one are walked identically.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kpemu.analyse.oracle.iptables import MAX_DEPTH
from kpemu.dumps import values
from kpemu.dumps.jumps import loop_or_depth
from kpemu.dumps.xtables.check import TARGETS, chain_name, check_values
from kpemu.dumps.xtables.listed import (
    IpvsListing,
    is_ipset_listing,
    is_ipvsadm_listing,
    read_ipset_listing,
    read_ipvsadm_listing,
)
from kpemu.errors import InputError, Problem
from kpemu.proxy.ipvs.ipvsadm_text import VirtualServer, parse_ipvsadm_save
from kpemu.proxy.rules import BUILTIN_CHAINS, Rule, RuleSet, Table, parse_args, split_line

_TABLES = (*BUILTIN_CHAINS, "security")
_WORD = re.compile(r'(?:"[^"]*"|[^\s"])+')
_COUNTERS = re.compile(r"\[\d{1,20}:\d{1,20}\]")
_COUNTED = re.compile(r"\[\d{1,20}:\d{1,20}\]\s+(-[AI] .*)")


@dataclass(frozen=True)
class IpsetDump:
    """`ipset save`: set name -> (type, members as printed)."""

    sets: dict[str, tuple[str, tuple[str, ...]]]


def _bad(path: str, lineno: int, msg: str) -> InputError:
    return InputError([Problem(path, f"line {lineno}", msg)])


@dataclass
class TableRead:
    """A table being read: its declared chains and the jumps between them (chain -> [(target, line)])."""

    name: str
    line: int
    out: Table  # the rules read so far, as kpemu.proxy.save.ruleset_from_restore builds them
    chains: set[str] = field(default_factory=set)
    jumps: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    excerpt: bool | None = None  # rules without any :CHAIN line (quoted from a note): chains are implied
    pending: list[tuple[str, int]] = field(default_factory=list)  # an excerpt's targets, resolved at COMMIT


def parse_iptables_save(text: str, path: str) -> RuleSet:
    """The rule set of an `iptables-save` dump (with or without `-c` counters); see `read_save`."""
    return read_save(text, path)[0]


def counted(line: str, path: str, n: int) -> str:
    """A rule of `iptables-save -c` without its `[packets:bytes]` prefix (other lines as they are)."""
    if not line.startswith("["):
        return line
    m = _COUNTED.fullmatch(line)
    if m is None:
        raise _bad(path, n, f"not a counted rule: {line[:60]!r}; iptables-save -c prints "
                            "'[packets:bytes] -A CHAIN ...'")
    return m[1]


def read_save(text: str, path: str) -> tuple[RuleSet, bool]:
    """The rule set of an `iptables-save` dump, checked line by line as `iptables-restore` checks it:
    every value, every chain declared (`:CHAIN`) before a rule is appended to it or jumps to it, no
    jump loop. A table without any `:CHAIN` line is an excerpt (rules quoted from a note, its empty
    chains left out): its chains are the ones its rules are in or jump to.

    As in seed 001's note, a `*table` may follow the previous one without its COMMIT, but the last
    table must end with COMMIT (iptables-save always prints it): without it the dump is truncated.
    """
    table: TableRead | None = None
    seen_table = counters = False
    rs = RuleSet()
    lines = text.splitlines()
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("[") and table is not None:
            line, counters = counted(line, path, n), True
        if line.startswith("*"):
            name = line[1:]
            if name not in _TABLES:
                raise _bad(path, n, f"unknown table {line[:40]!r}; expected one of *{', *'.join(_TABLES)}")
            commit(table, path)
            table, seen_table = TableRead(name, n, rs.table(name), set(BUILTIN_CHAINS.get(name, ()))), True
        elif line == "COMMIT":
            if table is None:
                raise _bad(path, n, "COMMIT without a table (*nat, *filter, ...) before it")
            commit(table, path)
            table = None
        elif table is None:
            hint = " (a table's lines after its COMMIT)" if seen_table else ""
            raise _bad(path, n, f"line outside a table{hint}; an iptables-save dump starts each table with *name")
        elif line.startswith(":"):
            declare(table, line, path, n)
        elif line.startswith(("-A ", "-I ")):
            check_rule(table, line, path, n)
        else:
            raise _bad(path, n, f"not an iptables-save line: {line[:60]!r}; expected *table, :CHAIN, -A or COMMIT")
    if table is not None:
        last = len(lines)
        raise _bad(path, last, f"the dump is truncated: table *{table.name} (line {table.line}) has no "
                               "COMMIT; save the whole output of iptables-save")
    if not seen_table:
        raise InputError([Problem(path, "", "no table in the dump; expected the output of iptables-save")])
    return rs, counters


def commit(table: TableRead | None, path: str) -> None:
    """What the kernel checks when a table is committed: no jump loop (nor a nesting kpemu cannot walk)."""
    if table is None:
        return
    for target, n in table.pending:  # an excerpt leaves out its empty chains: a target only needs a chain's name
        try:
            chain_name(target)
        except ValueError as e:
            raise _bad(path, n, f"-j {target[:40]}: no such target, and not a chain: {e}") from None
    wrong = loop_or_depth(table.jumps, MAX_DEPTH, "kpemu's oracle follows nested jumps")
    if wrong:
        raise _bad(path, wrong[1], f"table *{table.name}: {wrong[0]}")


def declare(table: TableRead, line: str, path: str, n: int) -> None:
    parts = line[1:].split()
    if len(parts) < 2:
        raise _bad(path, n, f"chain line {line[:60]!r} is cut short; expected ':CHAIN POLICY [packets:bytes]'")
    name, policy = parts[0], parts[1]
    if table.excerpt:
        raise _bad(path, n, f"chain {name[:40]} is declared after the table's rules; iptables-save declares every "
                            "chain first")
    table.excerpt = False
    builtin = name in BUILTIN_CHAINS.get(table.name, ())
    try:
        if not builtin:
            chain_name(name)
    except ValueError as e:
        raise _bad(path, n, str(e)) from None
    if policy not in (("ACCEPT", "DROP") if builtin else ("-",)):
        want = "ACCEPT or DROP (a built-in chain)" if builtin else "- (a user chain has no policy)"
        raise _bad(path, n, f"chain {name}: policy {policy[:20]!r}; expected {want}")
    if len(parts) > 3 or (len(parts) == 3 and not _COUNTERS.fullmatch(parts[2])):
        raise _bad(path, n, f"chain {name}: expected the counters as [packets:bytes], got {' '.join(parts[2:])[:40]!r}")
    if name in table.chains and not builtin:
        raise _bad(path, n, f"chain {name} is declared twice in table *{table.name}")
    table.chains.add(name)
    table.out.chain(name).policy = policy if builtin else "ACCEPT"


def check_rule(table: TableRead, line: str, path: str, n: int) -> None:
    try:
        toks = _split(line)
    except ValueError as e:
        raise _bad(path, n, f"rule is cut short ({e}): {line[:60]!r}") from None
    if len(toks) < 3:
        raise _bad(path, n, f"rule is cut short: {line[:60]!r}")
    chain = toks[1]
    if table.excerpt is None:
        table.excerpt = True
    if table.excerpt:
        table.chains.add(chain)
    elif chain not in table.chains:
        raise _bad(path, n, f"-A {chain[:40]}: no chain {chain[:40]} declared in table *{table.name} before it "
                            "(iptables-restore refuses the rule; the dump is cut short or edited)")
    args, pos = toks[2:], None
    if toks[0] == "-I":
        pos = 1
    if toks[0] == "-I" and args[0].isdigit():
        try:
            values.integer(args[0], 1, 0xFFFFFFFF, "a rule position")
        except ValueError as e:
            raise _bad(path, n, f"-I {chain}: {e}") from None
        pos, args = int(args[0]), args[1:]
        if pos > len(table.out.chain(chain).rules) + 1:
            raise _bad(path, n, f"-I {chain} {pos}: the chain has {len(table.out.chain(chain).rules)} rule(s) "
                                "before it (iptables-restore refuses an index of insertion too big)")
    try:
        p = parse_args(args)
    except IndexError:
        raise _bad(path, n, f"rule is cut short (an option without its value): {line[:80]!r}") from None
    if p.target == "DNAT" and not p.dnat_to:
        raise _bad(path, n, "DNAT without --to-destination: the rule is cut short")
    for m in p.matches:
        for o in m.options:
            if o.name in ("--dport", "--sport", "--probability", "--mark") and not o.values:
                raise _bad(path, n, f"{o.name} without a value: the rule is cut short")
    try:
        check_values(p)
    except ValueError as e:
        raise _bad(path, n, f"{chain}: {e}") from None
    if table.excerpt and p.target is not None and p.target not in TARGETS:
        table.pending.append((p.target, n))
        table.jumps.setdefault(chain, []).append((p.target, n))
    else:
        _target(table, chain, p.target, path, n)
    rule = Rule(chain, tuple(args), line=n)
    rule.__dict__["parsed"] = p  # parsed once (Rule.parsed is a cached property)
    if pos is None:
        table.out.chain(chain).rules.append(rule)
        table.out.sequence.append(rule)
    else:
        table.out.chain(chain).rules.insert(pos - 1, rule)


def _split(line: str) -> list[str]:
    """A rule's tokens as kpemu.proxy.rules.split_line gives them (POSIX shell words), at C speed when
    the line has no single quote or backslash: double-quoted parts join the word they touch."""
    if "'" in line or "\\" in line:
        return split_line(line)
    if line.count('"') % 2:
        raise ValueError("No closing quotation")
    return [w.replace('"', "") for w in _WORD.findall(line)]


def _target(table: TableRead, chain: str, target: str | None, path: str, n: int) -> None:
    """A rule's target is an extension iptables loads or a user chain declared before it."""
    if target is None or (target in TARGETS and target not in table.chains):
        return
    if target not in table.chains or target in BUILTIN_CHAINS.get(table.name, ()):
        raise _bad(path, n, f"-j {target[:40]}: no chain {target[:40]} declared in table *{table.name} and no such "
                            "target (iptables-restore refuses the rule; the dump is cut short or edited)")
    table.jumps.setdefault(chain, []).append((target, n))


_SCHEDULERS = ("rr", "wrr", "lc", "wlc", "lblc", "lblcr", "dh", "sh", "sed", "nq", "fo", "ovf", "mh", "twos")
_VS_OPTIONS = {"-s": lambda v: _one_of(v, _SCHEDULERS, "a scheduler"), "-p": lambda v: values.integer(v, 0, 0xFFFFFFFF),
               "-M": values.ipv4, "-b": lambda v: v, "--pe": lambda v: v}
_RS_OPTIONS = {"-r": values.host_port, "-w": lambda v: values.integer(v, 0, 0x7FFFFFFF, "a weight"),
               "-x": lambda v: values.integer(v, 0, 0xFFFFFFFF), "-y": lambda v: values.integer(v, 0, 0xFFFFFFFF)}
_RS_FLAGS = ("-m", "-g", "-i")


def _one_of(v: str, allowed: tuple[str, ...], what: str) -> str:
    if v not in allowed:
        raise ValueError(f"{v[:40]!r} is not {what} ({', '.join(allowed)})")
    return v


def _ipvs_options(toks: list[str], known: dict, flags: tuple[str, ...]) -> dict[str, str]:
    """`-x VALUE` pairs (and value-less `flags`) of an ipvsadm line, each value checked."""
    opts: dict[str, str] = {}
    i = 0
    while i < len(toks):
        name = toks[i]
        if name in flags:
            opts[name] = ""
            i += 1
            continue
        if name not in known:
            raise ValueError(f"option {name[:40]!r}: ipvsadm -Sn prints {', '.join([*known, *flags])} here")
        if i + 1 >= len(toks):
            raise ValueError(f"{name} without its value: the line is cut short")
        if name in opts:
            raise ValueError(f"{name} given twice")
        try:
            known[name](toks[i + 1])
        except ValueError as e:
            raise ValueError(f"{name}: {e}") from None
        opts[name] = toks[i + 1]
        i += 2
    return opts


def read_ipvs(text: str, path: str) -> IpvsListing:
    """The virtual servers of `ipvsadm -Sn` or of a listing (`ipvsadm -Ln`, `--stats`, `--rate`), and its form."""
    if is_ipvsadm_listing(text):
        return read_ipvsadm_listing(text, path)
    return IpvsListing(parse_ipvsadm(text, path), "ipvsadm -Sn")


def parse_ipvsadm(text: str, path: str) -> list[VirtualServer]:
    """Virtual servers of an `ipvsadm -Sn` dump, each value checked as ipvsadm checks it; a line
    that is not -A/-a, a service given twice or a real server before its service is an error."""
    if is_ipvsadm_listing(text):
        return read_ipvsadm_listing(text, path).servers
    known: dict[str, set[str]] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        tok = raw.split()
        if not tok:
            continue
        if tok[0] not in ("-A", "-a") or len(tok) < 3 or tok[1] not in ("-t", "-u", "--sctp-service"):
            raise _bad(path, n, f"not an ipvsadm -Sn line: {raw[:60]!r}; expected '-A -t ADDR:PORT -s SCHED' "
                                "or '-a -t ADDR:PORT -r ADDR:PORT -m -w W'")
        name = f"{tok[1]} {tok[2]}"
        try:
            values.host_port(tok[2])
            opts = _ipvs_options(tok[3:], *((_VS_OPTIONS, ()) if tok[0] == "-A" else (_RS_OPTIONS, _RS_FLAGS)))
        except ValueError as e:
            raise _bad(path, n, f"{tok[0]} {name[:60]}: {e} (kpemu models IPv4)") from None
        if tok[0] == "-A":
            if "-s" not in opts:
                raise _bad(path, n, "virtual server without '-s SCHEDULER': the line is cut short")
            if name in known:
                raise _bad(path, n, f"virtual server {name} given twice (ipvsadm: service already exists)")
            known[name] = set()
        else:
            if name not in known:
                raise _bad(path, n, f"real server of {tok[2]} before its virtual server (-A line)")
            if "-r" not in opts or "-w" not in opts:
                raise _bad(path, n, "real server without '-r ADDR:PORT' and '-w WEIGHT': the line is cut short")
            if opts["-r"] in known[name]:
                raise _bad(path, n, f"real server {opts['-r']} of {name} given twice (ipvsadm: destination "
                                    "already exists)")
            known[name].add(opts["-r"])
    return parse_ipvsadm_save(text)


_SET_TYPES = ("hash:ip", "hash:ip,port", "hash:ip,port,ip", "hash:ip,port,net", "hash:net", "hash:net,port",
              "hash:net,iface", "hash:ip,mark", "hash:net,net", "hash:net,port,net", "bitmap:port", "bitmap:ip",
              "hash:mac", "list:set")
_MEMBER_PART = {"ip": values.ipv4, "net": values.ipv4_net,
                "port": lambda v: values.port(v.partition(":")[2] if ":" in v else v),
                "mark": values.mark}


def _check_member(set_type: str, member: str) -> None:
    kinds = set_type.split(":", 1)[1].split(",")
    if set_type.startswith("bitmap:port"):
        kinds = ["port"]
    parts = member.split(",")
    if len(parts) != len(kinds):
        raise ValueError(f"member {member[:60]!r} of a {set_type} set: expected {len(kinds)} part(s), "
                         f"{','.join(kinds)}")
    for kind, part in zip(kinds, parts, strict=True):
        check = _MEMBER_PART.get(kind)
        if check is None:
            continue
        if kind == "port" and ":" in part and part.partition(":")[0] not in ("tcp", "udp", "sctp", "udplite"):
            raise ValueError(f"{part[:40]!r}: expected PROTO:PORT (tcp, udp, sctp)")
        try:
            check(part)
        except ValueError as e:
            raise ValueError(f"member {member[:60]!r}: {e}") from None


def parse_ipset_save(text: str, path: str) -> IpsetDump:
    """Sets and members of an `ipset save` dump, or of an `ipset list` (kpemu.dumps.xtables.listed),
    each member checked against its set's type."""
    sets: dict[str, tuple[str, list[str]]] = {}
    if is_ipset_listing(text):
        for n, name, set_type, members in read_ipset_listing(text, path):
            _create(sets, name, set_type, path, n)
            for m, member in members:
                _add(sets, name, member, path, m)
        return IpsetDump({k: (t, tuple(m)) for k, (t, m) in sets.items()})
    for n, raw in enumerate(text.splitlines(), 1):
        tok = raw.split()
        if not tok:
            continue
        if tok[0] == "create" and len(tok) >= 3:
            _create(sets, tok[1], tok[2], path, n)
        elif tok[0] == "add" and len(tok) == 3:
            if tok[1] not in sets:
                raise _bad(path, n, f"member of set {tok[1]} before its 'create' line")
            _add(sets, tok[1], tok[2], path, n)
        else:
            raise _bad(path, n, f"not an ipset save line: {raw[:60]!r}; expected 'create NAME TYPE ...' or "
                                "'add NAME MEMBER'")
    return IpsetDump({k: (t, tuple(m)) for k, (t, m) in sets.items()})


def _create(sets: dict[str, tuple[str, list[str]]], name: str, set_type: str, path: str, n: int) -> None:
    if set_type not in _SET_TYPES:
        raise _bad(path, n, f"set {name[:40]}: type {set_type[:40]!r} is not an ipset type ({', '.join(_SET_TYPES)})")
    if len(name) > 31 or name in sets:
        raise _bad(path, n, f"set {name[:40]}: a name longer than 31 characters or given twice "
                            "(ipset: set with the same name already exists)")
    sets[name] = (set_type, [])


def _add(sets: dict[str, tuple[str, list[str]]], name: str, member: str, path: str, n: int) -> None:
    try:
        _check_member(sets[name][0], member)
    except ValueError as e:
        raise _bad(path, n, f"set {name}: {e}") from None
    sets[name][1].append(_member(sets[name][0], member))


def _member(set_type: str, member: str) -> str:
    """A saved member in the form kube-proxy adds it (a bare address in a ...,net set is a /32)."""
    if set_type.endswith(",net"):
        head, _, net = member.rpartition(",")
        return f"{head},{net}" if "/" in net else f"{head},{net}/32"
    return member
