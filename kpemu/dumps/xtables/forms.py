"""Read iptables rules in every form people paste (pure): `iptables-save` (with or without `-c`
counters), `iptables -S` / `iptables -t nat -S` (-P/-N/-A lines, `-v` counters), and a fragment
(rules grep'ped out of either, with no `*table`/`COMMIT` and missing chains). The form is told by the
text itself; the table of a form without `*table` lines by `--table`, its -P policies or its chain
and target names (kpemu.dumps.xtables.tables), and the dump says which.

A fragment is walked as far as it goes: a chain it jumps to but does not hold is named in
`IptablesDump.missing`, and a walk through that jump stops there, undecided (kpemu.dumps.xtables.trace).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from kpemu.dumps.xtables.read import TableRead, check_rule, commit, counted, declare, read_save
from kpemu.dumps.xtables.tables import POLICIES, TABLE_NAMES, place
from kpemu.errors import InputError, Problem
from kpemu.proxy.rules import BUILTIN_CHAINS, Rule, RuleSet, parse_args

SAVE, SAVE_COUNTERS, LIST, FRAGMENT = "iptables-save", "iptables-save -c", "iptables -S", "a fragment"
_VERBOSE_COUNTERS = re.compile(r" -c \d{1,20} \d{1,20}(?= |$)")  # `iptables -S -v`
# the unconditional jumps kube-proxy writes from a built-in chain (proxier.go iptablesJumpChains); a
# fragment without the built-in chain gets them, and says so
_ENTRIES = {("nat", "PREROUTING"): ("KUBE-SERVICES", "kubernetes service portals"),
            ("nat", "OUTPUT"): ("KUBE-SERVICES", "kubernetes service portals"),
            ("nat", "POSTROUTING"): ("KUBE-POSTROUTING", "kubernetes postrouting rules"),
            ("filter", "FORWARD"): ("KUBE-FORWARD", "kubernetes forwarding rules")}


@dataclass(frozen=True)
class IptablesDump:
    """Rules read from a dump, its form, what told each table (forms without `*table` lines), the
    chains a fragment jumps to but does not hold ((table, chain) -> the first line jumping there),
    and the jumps kpemu added for built-in chains a fragment leaves out."""

    rules: RuleSet
    form: str
    tables: dict[str, str] = field(default_factory=dict)
    missing: dict[tuple[str, str], int] = field(default_factory=dict)
    assumed: tuple[str, ...] = ()

    def describe(self, path: str) -> str:
        """`FILE (iptables -S; table nat: line 3: -j DNAT is only valid there)` for the trace's header."""
        parts = [self.form, *(f"table {t}: {why}" for t, why in self.tables.items())]
        if self.form == FRAGMENT:
            parts.append("what it leaves out can change the outcome")
        if self.missing:
            parts.append("chains jumped to but absent: " + ", ".join(
                f"{t}/{c} (line {n})" for (t, c), n in sorted(self.missing.items(), key=lambda kv: kv[1])))
        if self.assumed:
            parts.append("assumed as kube-proxy writes them: " + ", ".join(self.assumed))
        return f"{path} ({'; '.join(parts)})"


def _stop(chain: str) -> Rule:
    """What stands for a chain a fragment jumps to but does not hold: the walk stops there (the
    outcome is undecided, kpemu.dumps.xtables.trace), shown as this rule."""
    rule = Rule(chain, ("-m", "comment", "--comment", f"{chain} is not in the dump: the walk stops here", "-j",
                        "ACCEPT"))
    rule.__dict__["parsed"] = parse_args(list(rule.args))
    return rule


def _bad(path: str, n: int, msg: str) -> InputError:
    return InputError([Problem(path, f"line {n}", msg)])


def _significant(text: str) -> list[tuple[int, str]]:
    out = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if line and not line.startswith("#"):
            out.append((n, line))
    return out


def read_iptables(text: str, path: str, table: str | None = None) -> IptablesDump:
    """The rules of an iptables dump in any of the forms above; `table`: what --table gave."""
    if table is not None and table not in TABLE_NAMES:
        raise InputError([Problem(path, "--table", f"{table[:40]!r} is not a table; expected one of "
                                                   f"{', '.join(TABLE_NAMES)}")])
    lines = _significant(text)
    star = next((n for n, line in lines if line.startswith("*")), None)
    if star is not None or not lines:
        if table is not None:
            raise _bad(path, star or 1, "--table is for iptables -S output and fragments; this dump names its "
                                        "tables (*table lines): leave --table out")
        rs, counters = read_save(text, path)
        return IptablesDump(rs, SAVE_COUNTERS if counters else SAVE)
    if any(line.startswith("-P ") for _, line in lines):
        return _read_list(lines, path, table)
    return _read_fragment(lines, path, table)


def _rule_parts(line: str, path: str, n: int) -> tuple[str, str, list[str]]:
    """(the rule line without counters, its chain, the tokens after the chain)."""
    line = _VERBOSE_COUNTERS.sub("", counted(line, path, n))
    toks = line.split()
    if len(toks) < 2 or toks[0] not in ("-A", "-I"):
        raise _bad(path, n, f"not a rule: {line[:60]!r}; expected -A CHAIN ...")
    return line, toks[1], toks[2:]


def _read_list(lines: list[tuple[int, str]], path: str, told: str | None) -> IptablesDump:
    """`iptables [-t T] -S` (one table, or several outputs one after the other): -P, then -N, then -A."""
    groups: list[list[tuple[int, str]]] = []
    for n, line in lines:
        if line.startswith("-P ") and (not groups or not groups[-1][-1][1].startswith("-P ")):
            groups.append([])
        if not groups:
            raise _bad(path, n, f"{line[:60]!r} before the first -P line; iptables -S prints the built-in chains' "
                                "policies (-P) first")
        groups[-1].append((n, line))
    if told is not None and len(groups) > 1:
        raise _bad(path, groups[1][0][0], "--table names one table, and this dump holds several iptables -S outputs "
                                          "(a second run of -P lines): leave --table out")
    rs, why = RuleSet(), {}
    for group in groups:
        policies = [(n, line.split()) for n, line in group if line.startswith("-P ")]
        chains = frozenset(p[1] for _, p in policies if len(p) > 1)
        name = told or POLICIES.get(chains)
        first = group[0][0]
        if name is None:
            raise _bad(path, first, f"-P lines for {', '.join(sorted(chains))[:80]}: no table has exactly these "
                                    "built-in chains (the output is cut or edited); give --table")
        if name in rs.tables:
            raise _bad(path, first, f"table {name} given twice (two iptables -S outputs of one table)")
        why[name] = why.get(name) or ("given by --table" if told else f"its -P policies (line {first})")
        tab = TableRead(name, first, rs.table(name), set(BUILTIN_CHAINS.get(name, ())), excerpt=False)
        for n, line in group:
            toks = line.split()
            if toks[0] == "-P":
                if len(toks) != 3:
                    raise _bad(path, n, f"{line[:60]!r}: expected -P CHAIN POLICY")
                declare(tab, f":{toks[1]} {toks[2]}", path, n)
            elif toks[0] == "-N":
                if len(toks) != 2:
                    raise _bad(path, n, f"{line[:60]!r}: expected -N CHAIN")
                declare(tab, f":{toks[1]} -", path, n)
            elif toks[0] in ("-A", "-I") or line.startswith("["):
                check_rule(tab, _rule_parts(line, path, n)[0], path, n)
            else:
                raise _bad(path, n, f"not a line of iptables -S: {line[:60]!r}; expected -P, -N or -A")
        commit(tab, path)
    return IptablesDump(rs, LIST, why)


def _read_fragment(lines: list[tuple[int, str]], path: str, told: str | None) -> IptablesDump:
    """Rules grep'ped out of iptables-save or iptables -S: chains implied by the rules, each rule's
    table placed (kpemu.dumps.xtables.tables.place)."""
    rules: list[tuple[int, str, list[str]]] = []
    texts: dict[int, str] = {}
    declared: list[tuple[int, str]] = []
    for n, line in lines:
        if line.startswith(("-N ", ":")):
            name = line[1:].split()[0] if line.startswith(":") else line.split()[1] if len(line.split()) > 1 else ""
            declared.append((n, name))
            continue
        if line == "COMMIT":
            continue
        if not (line.startswith(("-A ", "-I ")) or line.startswith("[")):
            raise _bad(path, n, f"not an iptables rule: {line[:60]!r}; expected iptables-save output (*table, "
                                ":CHAIN, -A, COMMIT), iptables -S output (-P, -N, -A) or -A lines of either")
        text, chain, args = _rule_parts(line, path, n)
        rules.append((n, chain, args))
        texts[n] = text
    if not rules:
        raise InputError([Problem(path, "", "no rule in the dump; expected the output of iptables-save or "
                                            "iptables -S (or -A lines of either)")])
    placed, why = place(rules, path, told)
    rs, tabs = RuleSet(), {}
    for p in placed:
        if p.table not in tabs:
            tabs[p.table] = TableRead(p.table, p.line, rs.table(p.table), set(BUILTIN_CHAINS.get(p.table, ())),
                                      excerpt=True)
        check_rule(tabs[p.table], texts[p.line], path, p.line)
    for _, name in declared:  # an empty chain grep'ped with its :CHAIN or -N line
        for tab in tabs.values():
            tab.chains.add(name)
    missing: dict[tuple[str, str], int] = {}
    assumed = []
    for tab in tabs.values():
        commit(tab, path)
        for target, n in tab.pending:
            if target not in tab.chains and not target.startswith("-"):
                missing.setdefault((tab.name, target), n)
                tab.chains.add(target)
                tab.out.chain(target).rules.append(_stop(target))
        for (t, hook), (target, comment) in _ENTRIES.items():
            if t == tab.name and hook not in tab.out.chains and target in tab.chains:
                rule = Rule(hook, ("-m", "comment", "--comment", comment, "-j", target))
                rule.__dict__["parsed"] = parse_args(list(rule.args))
                tab.out.chain(hook).rules.append(rule)
                assumed.append(f"-A {hook} -j {target} ({t})")
    return IptablesDump(rs, FRAGMENT, why, missing, tuple(assumed))
