"""Upstream's own comparison for iptables-mode output, ported from kubernetes/kubernetes
pkg/proxy/iptables/proxier_test.go: `sortIPTablesRules` + `orderByCommentServiceName` (what
`assertIPTablesRulesEqual` applies to the proxier's restore data before comparing), and the
jump check it runs after comparing (`checkIPTablesRuleJumps`).
"""

from __future__ import annotations

import shlex
from functools import cmp_to_key

from kpemu.dumps.xtables.check import TARGETS
from kpemu.proxy.rules import BUILTIN_CHAINS, parse_args, split_line

NODEPORTS, SERVICES = "KUBE-NODEPORTS", "KUBE-SERVICES"
# What kube-proxy writes outside its iptables-restore data (EnsureChain / EnsureRule), so absent
# from upstream's `fp.iptablesData`: the canary chains and the jumps from built-in chains.
NOT_RESTORE_DATA = ("KUBE-PROXY-CANARY",)


def _comment(rule: str) -> str | None:
    toks = shlex.split(rule)
    for i, t in enumerate(toks[:-1]):
        if t == "--comment":
            return toks[i + 1]
    return None


def _service_name(comment: str) -> str:
    """The comment up to the first space or colon."""
    cut = [i for i in (comment.find(" "), comment.find(":")) if i != -1]
    return comment[:min(cut)] if cut else comment


def _order_by_comment_service_name(a: str, b: str) -> bool:
    ca, cb = _comment(a), _comment(b)
    if ca is None or cb is None:
        return False
    return _service_name(ca) < _service_name(cb)


def _stable_sort(rules: list[str], less) -> list[str]:  # type: ignore[no-untyped-def]
    return sorted(rules, key=cmp_to_key(lambda a, b: -1 if less(a, b) else (1 if less(b, a) else 0)))


def _chain_key(name: str) -> tuple[int, str]:
    if name == NODEPORTS:
        return (0, "")
    if name == SERVICES:
        return (1, "")
    return (2 if name.startswith("KUBE-") else 3, name)


def _chain(line: str) -> str:
    """The chain a `:CHAIN - [0:0]` or `-A CHAIN ...` line is about ("" for other lines)."""
    if line.startswith(":"):
        return line[1:].split()[0]
    return line.split()[1] if line.startswith("-A ") else ""


def restore_data(restore_text: str) -> str:
    """kpemu's iptables-restore input cut to what syncProxyRules writes (filter and nat tables,
    no canary chain, no `-I` jump from a built-in chain)."""
    out: list[str] = []
    keep = False
    for line in restore_text.splitlines():
        if line.startswith("*"):
            keep = line in ("*filter", "*nat")
        elif line.startswith("-I ") or _chain(line) in NOT_RESTORE_DATA:
            continue
        if keep:
            out.append(line)
    return "\n".join(out) + "\n"


def sort_iptables_rules(data: str) -> str:
    """sortIPTablesRules: tables by name; KUBE-NODEPORTS, KUBE-SERVICES, other KUBE-* chains, then
    the rest (alphabetical); rules of KUBE-NODEPORTS / KUBE-SERVICES stably sorted by the service
    name in their comment, keeping nat KUBE-SERVICES' "must be the last rule" rule last."""
    tables: dict[str, tuple[list[str], dict[str, list[str]]]] = {}
    table = ""
    for line in data.splitlines():
        if line.startswith("*"):
            table = line[1:]
            tables[table] = ([], {})
        elif line.startswith(":"):
            name = line[1:].split()[0]
            tables[table][0].append(name)
            tables[table][1].setdefault(name, [])
        elif line.startswith("-A "):
            tables[table][1].setdefault(line.split()[1], []).append(line)
    out: list[str] = []
    for name in sorted(tables):
        chains, rules = tables[name]
        for ch in (NODEPORTS, SERVICES):
            if ch not in rules:
                continue
            if name == "nat" and ch == SERVICES:
                def less(a: str, b: str) -> bool:
                    if "must be the last rule" in (_comment(a) or ""):
                        return False
                    if "must be the last rule" in (_comment(b) or ""):
                        return True
                    return _order_by_comment_service_name(a, b)
                rules[ch] = _stable_sort(rules[ch], less)
            else:
                rules[ch] = _stable_sort(rules[ch], _order_by_comment_service_name)
        ordered = sorted(chains, key=_chain_key)
        out.append(f"*{name}")
        out += [f":{c} - [0:0]" for c in ordered]
        for c in ordered:
            out += rules.get(c, [])
        out.append("COMMIT")
    return "\n".join(out) + "\n"


def check_iptables_rule_jumps(data: str) -> list[str]:
    """checkIPTablesRuleJumps, as iptables-restore would judge it: what is wrong with the jumps of an
    iptables-restore input or iptables-save dump ([] when nothing is). Every `-j` / `-g` target must be a
    target extension (ACCEPT, DNAT, MARK, ...: kpemu.dumps.xtables.check.TARGETS) or a chain declared with a
    `:CHAIN` line of the same table (never a built-in chain), and every `-A` / `-I` must add to a built-in
    chain of the table or a declared one."""
    tables: dict[str, tuple[set[str], list[tuple[str, str | None]]]] = {}
    declared: set[str] = set()
    rules: list[tuple[str, str | None]] = []
    for line in data.splitlines():
        if line.startswith("*"):
            declared, rules = set(), []
            tables[line[1:]] = (declared, rules)
        elif line.startswith(":"):
            declared.add(line[1:].split()[0])
        elif line.startswith(("-A ", "-I ")):
            toks = split_line(line)
            args = toks[3:] if toks[0] == "-I" and toks[2:3] and toks[2].isdigit() else toks[2:]
            rules.append((toks[1], parse_args(args).target))
    problems = []
    for table, (chains, table_rules) in tables.items():
        builtin = set(BUILTIN_CHAINS.get(table, ()))
        for chain, target in table_rules:
            if chain not in chains | builtin:
                problems.append(f"*{table}: a rule is added to {chain}, which is not declared")
            if target is not None and target not in TARGETS and (target not in chains or target in builtin):
                problems.append(f"*{table}: {chain} jumps to {target}, neither a target nor a declared chain")
    return problems
