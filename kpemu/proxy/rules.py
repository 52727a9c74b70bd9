"""The structured form of an iptables rule set: tables -> chains -> rules, plus a parser.

A `Rule` keeps the exact argv kube-proxy writes after `-A CHAIN` (comment values unquoted), so
it renders back to the restore line byte for byte, and exposes its matches parsed (`rule.parsed`)
for code that walks the rules to predict a packet's path. The same parser reads `iptables-save`
lines, so generated and observed rules can be compared structurally.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from functools import cached_property

BUILTIN_CHAINS: dict[str, tuple[str, ...]] = {
    "filter": ("INPUT", "FORWARD", "OUTPUT"),
    "nat": ("PREROUTING", "INPUT", "OUTPUT", "POSTROUTING"),
    "mangle": ("PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"),
    "raw": ("PREROUTING", "OUTPUT"),
}
# Options that belong to the rule itself rather than to the last `-m` module.
_BASE_OPTS = {"-s", "--source", "-d", "--destination", "-p", "--protocol", "-i", "--in-interface",
              "-o", "--out-interface", "-f", "--fragment"}
_BASE_ALIAS = {"--source": "-s", "--destination": "-d", "--protocol": "-p", "--in-interface": "-i",
               "--out-interface": "-o", "--fragment": "-f"}


@dataclass(frozen=True)
class Option:
    """One option of a match or target: `[!] --name value...`."""

    name: str
    values: tuple[str, ...] = ()
    negated: bool = False


@dataclass(frozen=True)
class Match:
    """One `-m module` with its options (`implicit` when loaded by `-p tcp --dport` alone)."""

    module: str
    options: tuple[Option, ...] = ()
    implicit: bool = False

    def get(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)


@dataclass(frozen=True)
class ParsedRule:
    """A rule's fields: base matches, `-m` matches in order, target and target options."""

    base: tuple[Option, ...]
    matches: tuple[Match, ...]
    target: str | None
    target_options: tuple[Option, ...]

    def _base(self, flag: str) -> Option | None:
        return next((o for o in self.base if o.name == flag), None)

    def match(self, module: str) -> Match | None:
        """The first match of `module` (e.g. "comment", "tcp", "statistic")."""
        return next((m for m in self.matches if m.module == module), None)

    def _opt(self, module: str, name: str) -> Option | None:
        m = self.match(module)
        return m.get(name) if m else None

    @property
    def src(self) -> tuple[str, bool] | None:
        """(address or CIDR, negated) of `-s`."""
        o = self._base("-s")
        return (o.values[0], o.negated) if o else None

    @property
    def dst(self) -> tuple[str, bool] | None:
        """(address or CIDR, negated) of `-d`."""
        o = self._base("-d")
        return (o.values[0], o.negated) if o else None

    @property
    def proto(self) -> str | None:
        o = self._base("-p")
        return o.values[0] if o and o.values else None

    @property
    def dport(self) -> int | None:
        for m in self.matches:
            o = m.get("--dport") if m.module in ("tcp", "udp", "sctp") else None
            if o:
                return int(o.values[0])
        return None

    @property
    def comment(self) -> str | None:
        o = self._opt("comment", "--comment")
        return o.values[0] if o and o.values else None

    @property
    def mark(self) -> tuple[str, bool] | None:
        """(value/mask, negated) of `-m mark --mark`."""
        o = self._opt("mark", "--mark")
        return (o.values[0], o.negated) if o else None

    @property
    def probability(self) -> float | None:
        o = self._opt("statistic", "--probability")
        return float(o.values[0]) if o else None

    @property
    def addrtype(self) -> dict[str, tuple[str, bool]]:
        """{"src"|"dst": (type, negated)} of `-m addrtype`."""
        out: dict[str, tuple[str, bool]] = {}
        m = self.match("addrtype")
        for o in m.options if m else ():
            if o.name in ("--src-type", "--dst-type"):
                out[o.name[2:5]] = (o.values[0], o.negated)
        return out

    @property
    def ctstate(self) -> tuple[str, bool] | None:
        o = self._opt("conntrack", "--ctstate")
        return (o.values[0], o.negated) if o else None

    @property
    def recent(self) -> dict[str, str | bool] | None:
        """`-m recent` as {"name", "action" (set/rcheck), "seconds", "reap"}."""
        m = self.match("recent")
        if not m:
            return None
        out: dict[str, str | bool] = {}
        for o in m.options:
            if o.name in ("--set", "--rcheck", "--update", "--remove"):
                out["action"] = o.name[2:]
            elif o.name == "--reap":
                out["reap"] = True
            elif o.values:
                out[o.name[2:]] = o.values[0]
        return out

    @property
    def dnat_to(self) -> str | None:
        o = next((o for o in self.target_options if o.name == "--to-destination"), None)
        return o.values[0] if o and o.values else None


@dataclass(frozen=True)
class Rule:
    """One `-A CHAIN args...` line; `args` are the tokens after the chain name."""

    chain: str
    args: tuple[str, ...]
    owner: str = "kube-proxy"  # "kubelet" for the rules kubelet installs
    line: int = field(default=0, compare=False)  # its line in the dump it was read from (0: generated)

    @cached_property
    def parsed(self) -> ParsedRule:
        return parse_args(self.args)

    @property
    def target(self) -> str | None:
        return self.parsed.target

    def restore_line(self) -> str:
        """The line as kube-proxy writes it (multi-word comments double-quoted)."""
        return " ".join(["-A", self.chain, *(_quote(a) for a in self.args)])


@dataclass(frozen=True)
class JumpRule:
    """One jump from a built-in chain, as kube-proxy (or kubelet) installs it with
    `EnsureRule(Prepend, table, chain, args...)`."""

    table: str
    chain: str
    target: str
    comment: str | None = None
    matches: tuple[str, ...] = ()  # written before the comment, e.g. `-m conntrack --ctstate NEW`
    owner: str = "kube-proxy"

    @property
    def args(self) -> tuple[str, ...]:
        """The tokens after `-A CHAIN`."""
        comment = ("-m", "comment", "--comment", self.comment) if self.comment else ()
        return (*self.matches, *comment, "-j", self.target)

    @property
    def line(self) -> str:
        """The restore line, `-A CHAIN ...`."""
        return Rule(self.chain, self.args, self.owner).restore_line()


@dataclass
class Chain:
    """A chain and its rules in order; built-in chains carry only the jumps kpemu owns."""

    name: str
    rules: list[Rule] = field(default_factory=list)
    builtin: bool = False
    policy: str = "ACCEPT"  # a built-in chain's policy (a dump's `:FORWARD DROP`)


@dataclass
class Table:
    """One table: chains in the order their `:CHAIN` lines are written."""

    name: str
    chains: dict[str, Chain] = field(default_factory=dict)
    sequence: list[Rule] = field(default_factory=list)  # every rule in generation order

    def chain(self, name: str) -> Chain:
        """The chain, created (empty) on first use."""
        if name not in self.chains:
            self.chains[name] = Chain(name, builtin=name in BUILTIN_CHAINS.get(self.name, ()))
        return self.chains[name]

    def add(self, chain: str, *args: str, owner: str = "kube-proxy") -> Rule:
        rule = Rule(chain, tuple(args), owner)
        self.chain(chain).rules.append(rule)
        self.sequence.append(rule)
        return rule

    @property
    def user_chains(self) -> list[Chain]:
        return [c for c in self.chains.values() if not c.builtin]

    @property
    def builtin_chains(self) -> list[Chain]:
        order = BUILTIN_CHAINS.get(self.name, ())
        return sorted((c for c in self.chains.values() if c.builtin), key=lambda c: order.index(c.name))


@dataclass
class RuleSet:
    """Tables in the order kube-proxy writes them."""

    tables: dict[str, Table] = field(default_factory=dict)

    def table(self, name: str) -> Table:
        if name not in self.tables:
            self.tables[name] = Table(name)
        return self.tables[name]

    def rules(self, table: str, chain: str) -> list[Rule]:
        t = self.tables.get(table)
        return list(t.chains[chain].rules) if t and chain in t.chains else []


_NEEDS_QUOTES = re.compile(r'[ \t"]')


def _quote(token: str) -> str:
    if token == "" or _NEEDS_QUOTES.search(token):
        return '"' + token.replace('"', '\\"') + '"'
    return token


def split_line(line: str) -> list[str]:
    """Tokenise one restore / save line (double-quoted strings become one token)."""
    return shlex.split(line, posix=True)


def parse_args(args: tuple[str, ...] | list[str]) -> ParsedRule:
    """Parse the tokens after `-A CHAIN` into base options, matches and target."""
    base: list[Option] = []
    matches: list[tuple[str, list[Option], bool]] = []
    target: str | None = None
    target_opts: list[Option] = []
    i, n = 0, len(args)
    negate = False
    proto: str | None = None
    while i < n:
        tok = args[i]
        if tok == "!":
            negate = True
            i += 1
            continue
        if tok in ("-j", "--jump", "-g", "--goto"):
            target = args[i + 1]
            i += 2
            while i < n:
                neg = args[i] == "!"
                if neg:
                    i += 1
                name = args[i]
                vals, i = _values(args, i + 1)
                target_opts.append(Option(name, vals, neg))
            break
        if tok in ("-m", "--match"):
            matches.append((args[i + 1], [], False))
            i += 2
            continue
        vals, j = _values(args, i + 1)
        if tok in _BASE_OPTS:
            name = _BASE_ALIAS.get(tok, tok)
            base.append(Option(name, vals, negate))
            if name == "-p":
                proto = vals[0] if vals else None
        elif matches:
            matches[-1][1].append(Option(tok, vals, negate))
        else:  # e.g. "-p tcp --dport 80": the protocol match is loaded implicitly
            matches.append((proto or "?", [Option(tok, vals, negate)], True))
        negate = False
        i = j
    return ParsedRule(
        base=tuple(base),
        matches=tuple(Match(m, tuple(opts), impl) for m, opts, impl in matches),
        target=target,
        target_options=tuple(target_opts),
    )


def _values(args: tuple[str, ...] | list[str], i: int) -> tuple[tuple[str, ...], int]:
    vals: list[str] = []
    while i < len(args) and args[i] != "!" and not (args[i].startswith("-") and len(args[i]) > 1
                                                     and not args[i][1].isdigit()):
        vals.append(args[i])
        i += 1
    return tuple(vals), i


def parse_rule_line(line: str, owner: str = "kube-proxy") -> Rule:
    """A `-A CHAIN ...` line (restore or save form) as a Rule."""
    toks = split_line(line)
    if len(toks) < 2 or toks[0] != "-A":
        raise ValueError(f"not an -A rule line: {line!r}")
    return Rule(toks[1], tuple(toks[2:]), owner)
