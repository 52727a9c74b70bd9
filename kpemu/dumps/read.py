"""Read a node's dumps strictly: every line must be one `iptables-save` / `ipvsadm -Sn` /
`ipset save` prints, and a dump cut short is an error naming the file and line (exit 2).

The rules are parsed by the same code that reads kpemu's own generated rules
(kpemu.proxy.save / rules), so a real dump and a generated one are walked identically.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kpemu.errors import InputError, Problem
from kpemu.proxy.ipvs.ipvsadm_text import VirtualServer, parse_ipvsadm_save
from kpemu.proxy.rules import BUILTIN_CHAINS, RuleSet, parse_args, split_line
from kpemu.proxy.save import ruleset_from_restore

_TABLES = (*BUILTIN_CHAINS, "security")


@dataclass(frozen=True)
class IpsetDump:
    """`ipset save`: set name -> (type, members as printed)."""

    sets: dict[str, tuple[str, tuple[str, ...]]]


def read_text(path: str) -> str:
    """A dump file's text (`-` is standard input); InputError when it cannot be read."""
    try:
        return Path("/dev/stdin" if path == "-" else path).read_text()
    except OSError as e:
        raise InputError([Problem(path, "", f"cannot read the dump: {e.strerror}")]) from None


def _bad(path: str, lineno: int, msg: str) -> InputError:
    return InputError([Problem(path, f"line {lineno}", msg)])


def parse_iptables_save(text: str, path: str) -> RuleSet:
    """The rule set of an `iptables-save` dump, checked line by line.

    As in seed 001's note, a `*table` may follow the previous one without its COMMIT, but the last
    table must end with COMMIT (iptables-save always prints it): without it the dump is truncated.
    """
    open_table: tuple[str, int] | None = None
    seen_table = False
    lines = text.splitlines()
    for n, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("*"):
            name = line[1:]
            if name not in _TABLES:
                raise _bad(path, n, f"unknown table {line!r}; expected one of *{', *'.join(_TABLES)}")
            open_table, seen_table = (name, n), True
        elif line == "COMMIT":
            if open_table is None:
                raise _bad(path, n, "COMMIT without a table (*nat, *filter, ...) before it")
            open_table = None
        elif open_table is None:
            hint = " (a table's lines after its COMMIT)" if seen_table else ""
            raise _bad(path, n, f"line outside a table{hint}; an iptables-save dump starts each table with *name")
        elif line.startswith(":"):
            if len(line.split()) < 2:
                raise _bad(path, n, f"chain line {line!r} is cut short; expected ':CHAIN POLICY [packets:bytes]'")
        elif line.startswith(("-A ", "-I ")):
            _check_rule(line, path, n)
        else:
            raise _bad(path, n, f"not an iptables-save line: {line[:60]!r}; expected *table, :CHAIN, -A or COMMIT")
    if open_table is not None:
        last = len(lines)
        raise _bad(path, last, f"the dump is truncated: table *{open_table[0]} (line {open_table[1]}) has no "
                               "COMMIT; save the whole output of iptables-save")
    if not seen_table:
        raise InputError([Problem(path, "", "no table in the dump; expected the output of iptables-save")])
    return ruleset_from_restore(text)


def _check_rule(line: str, path: str, n: int) -> None:
    try:
        toks = split_line(line)
    except ValueError as e:
        raise _bad(path, n, f"rule is cut short ({e}): {line[:60]!r}") from None
    if len(toks) < 3:
        raise _bad(path, n, f"rule is cut short: {line!r}")
    args = toks[2:] if toks[0] == "-A" else toks[2 + (toks[2].isdigit() if len(toks) > 2 else 0):]
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


def parse_ipvsadm(text: str, path: str) -> list[VirtualServer]:
    """Virtual servers of an `ipvsadm -Sn` dump; a line that is not -A/-a is an error."""
    known: set[str] = set()
    for n, raw in enumerate(text.splitlines(), 1):
        tok = raw.split()
        if not tok:
            continue
        if tok[0] not in ("-A", "-a") or len(tok) < 3 or tok[1] not in ("-t", "-u", "--sctp-service"):
            raise _bad(path, n, f"not an ipvsadm -Sn line: {raw[:60]!r}; expected '-A -t ADDR:PORT -s SCHED' "
                                "or '-a -t ADDR:PORT -r ADDR:PORT -m -w W'")
        name = f"{tok[1]} {tok[2]}"
        if tok[0] == "-A":
            if "-s" not in tok[3:-1]:
                raise _bad(path, n, "virtual server without '-s SCHEDULER': the line is cut short")
            known.add(name)
        else:
            if name not in known:
                raise _bad(path, n, f"real server of {tok[2]} before its virtual server (-A line)")
            if "-r" not in tok[3:-1] or "-w" not in tok[3:-1]:
                raise _bad(path, n, "real server without '-r ADDR:PORT' and '-w WEIGHT': the line is cut short")
    return parse_ipvsadm_save(text)


def parse_ipset_save(text: str, path: str) -> IpsetDump:
    """Sets and members of an `ipset save` dump."""
    sets: dict[str, tuple[str, list[str]]] = {}
    for n, raw in enumerate(text.splitlines(), 1):
        tok = raw.split()
        if not tok:
            continue
        if tok[0] == "create" and len(tok) >= 3:
            sets[tok[1]] = (tok[2], [])
        elif tok[0] == "add" and len(tok) == 3:
            if tok[1] not in sets:
                raise _bad(path, n, f"member of set {tok[1]} before its 'create' line")
            sets[tok[1]][1].append(_member(sets[tok[1]][0], tok[2]))
        else:
            raise _bad(path, n, f"not an ipset save line: {raw[:60]!r}; expected 'create NAME TYPE ...' or "
                                "'add NAME MEMBER'")
    return IpsetDump({k: (t, tuple(m)) for k, (t, m) in sets.items()})


def _member(set_type: str, member: str) -> str:
    """A saved member in the form kube-proxy adds it (a bare address in a ...,net set is a /32)."""
    if set_type.endswith(",net"):
        head, _, net = member.rpartition(",")
        return f"{head},{net}" if "/" in net else f"{head},{net}/32"
    return member
