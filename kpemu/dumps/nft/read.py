"""Read `nft list ruleset` / `nft list table ip kube-proxy` strictly (as the nft binary prints them,
with or without `-a` handles) into the structure kpemu's nftables generator produces
(kpemu.proxy.nftables.tx.Table), so a node's real table can be compared with the generated one and
walked by the same oracle (kpemu.analyse.oracle.nft).

`table ip kube-proxy` is read strictly, as kube-proxy writes it. The other `ip` and `inet` tables (a
distribution's `table inet filter`, flannel's `table ip flannel-ipv4`, iptables-nft's `table ip filter`
with docker's FORWARD policy drop) are on an IPv4 packet's path too: they are read as nft prints any
table (their objects other than chains, sets and maps are named and passed over) into
`NftDump.beside`, and the oracle walks their base chains beside kube-proxy's. Tables of the other
families (ip6, arp, bridge, netdev) and dormant tables are named in `NftDump.others`, not walked.
Rules keep nft's listing form (`meta mark set meta mark | 0x00004000`); `listed()` puts a generated
table in the same form with the listing module's own rule_text, so both sides are compared in one
form. A dump cut short or garbled is an error naming the file and the line (exit 2). `nft -j list
ruleset` (JSON) is turned into this text first (kpemu.dumps.nft.json) and read the same way, its
problems naming the JSON element; the other tables' rules are not read from JSON (their base chains
are, each undecided in the walk).
"""

from __future__ import annotations

import re
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, replace
from functools import lru_cache

from kpemu.analyse.oracle.nft import MAX_DEPTH, NftTable
from kpemu.dumps.jumps import loop_or_depth
from kpemu.dumps.nft.check import check_element, check_rule
from kpemu.dumps.nft.json import ruleset_text
from kpemu.dumps.values import integer
from kpemu.errors import InputError, Problem
from kpemu.proxy.nftables.listing import priority_text, rule_text
from kpemu.proxy.nftables.tx import FAMILY, TABLE, BaseHook, Chain, Counter, Element, NSet, Rule, Table

KUBE_PROXY = f"{FAMILY} {TABLE}"
IPV4_FAMILIES = ("ip", "inet")  # the families whose base chains an IPv4 packet passes
_HOOK = re.compile(r"^type (\w+) hook (\w+)(?: device \S+)? priority ([^;]+);(?: policy (\w+);)?$")
_QUOTED = re.compile(r'"(?:[^"\\]|\\.)*"')
_ELEMENT_TAIL = re.compile(r"(?: timeout \S+)?(?: expires \S+)?(?: counter packets \d+ bytes \d+)?$")
_SET_PROPS = ("type ", "typeof ", "flags ", "timeout ", "size ", "gc-interval ", "policy ", "comment ",
              "auto-merge", "counter")
_DURATION = re.compile(r"(\d+)(ms|d|h|m|s)")
_UNIT = {"d": 86400, "h": 3600, "m": 60, "s": 1, "ms": 0}


JSON_FORM = "nft -j list ruleset"  # the form of a libnftables JSON dump (kpemu.dumps.nft.json)


@dataclass
class NftDump:
    """A node's nftables dump: kube-proxy's table (None when the dump has none), the policies of
    its base chains, the other IPv4 tables in dump order (`before` of them listed before kube-proxy's),
    and the tables of other families (by `family name`), which an IPv4 packet does not pass."""

    path: str
    table: Table | None
    policies: dict[str, str] = field(default_factory=dict)
    others: list[str] = field(default_factory=list)
    form: str = "nft list ruleset"  # or JSON_FORM
    beside: list[NftTable] = field(default_factory=list)
    before: int = 0
    dormant: list[str] = field(default_factory=list)  # the tables of `others` that are IPv4 but dormant

    def describe(self) -> str:
        """`FILE (nft list ruleset; beside it: table inet filter; not on an IPv4 packet's path: ...)` for reports."""
        walked = [f"table {t.name}" + (" (rules not read)" if t.unread else "") for t in self.beside]
        dormant = [f"table {t}" for t in self.dormant]
        others = [f"table {t}" + (" (IPv6; kpemu models IPv4)" if t == "ip6 kube-proxy" else "")
                  for t in self.others if t not in self.dormant]
        tail = f"; beside it: {', '.join(walked)}" if walked else ""
        tail += f"; dormant: {', '.join(dormant)}" if dormant else ""
        tail += f"; not on an IPv4 packet's path: {', '.join(others)}" if others else ""
        return f"{self.path} ({self.form}{tail})"


def _without_handle(line: str) -> str:
    """The line without nft -a's trailing `# handle N` (found from the end: linear in the line)."""
    at = line.rfind("# handle ")
    if at > 0 and line[at - 1].isspace() and line[at + 9:].isdigit():
        return line[:at]
    return line


def _unquote(text: str) -> str:
    return text[1:-1].replace('\\"', '"').replace("\\\\", "\\")


def _balanced(text: str, depth: int = 0, quoted: bool = False) -> tuple[int, bool]:
    """(brace depth change outside quotes, whether every quote is closed), continuing from the state
    `depth`, `quoted` that the text before left (so a block read line by line is scanned once)."""
    if not quoted and '"' not in text and "\\" not in text:  # no quote: count the braces at C speed
        return depth + text.count("{") - text.count("}"), True
    esc = False
    for ch in text:
        if esc:
            esc = False
        elif ch == "\\":
            esc = True
        elif ch == '"':
            quoted = not quoted
        elif not quoted:
            depth += (ch == "{") - (ch == "}")
    return depth, not quoted


def _split_top(text: str) -> list[str]:
    """`a, b "x,y", c` -> items split at commas outside quotes and braces."""
    if '"' not in text and "{" not in text and "}" not in text:
        items = [t.strip() for t in text.split(",")]
        return items if len(items) > 1 or items[0] else []
    items, start, depth, quoted = [], 0, 0, False
    for i, ch in enumerate(text):
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch in "{}":
            depth += 1 if ch == "{" else -1
        elif not quoted and depth == 0 and ch == ",":
            items.append(text[start:i].strip())
            start = i + 1
    last = text[start:].strip()
    return [*items, last] if last or items else []


def _element(item: str) -> tuple[str, str | None, str | None] | None:
    """`KEY [timeout T] [expires E] [counter ...] [comment "C"] [: VALUE]` -> (key, comment, value),
    None when garbled; linear in the item (a comment cannot hold an unescaped quote)."""
    comment = value = None
    at = item.find(' comment "')
    if at >= 0:
        m = _QUOTED.match(item, at + 9)
        if m is None:
            return None
        comment, rest, item = _unquote(m[0]), item[m.end():], item[:at]
        if rest:
            if not rest.startswith(" : "):
                return None
            value = rest[3:].strip()
    elif " : " in item:
        item, _, value = item.partition(" : ")
        value = value.strip()
    tail = _ELEMENT_TAIL.search(item)
    key = item[:tail.start()] if tail else item
    return (key, comment, value) if key.strip() and value != "" else None


def duration_seconds(text: str) -> int | None:
    """nft's `3h`, `1m30s` -> seconds (None when it is not a duration); ValueError when a number in
    it is longer than any nft prints (values.MAX_DIGITS), which int() could not even read."""
    if not re.fullmatch(r"(?:\d+(?:ms|d|h|m|s))+", text):
        return None
    return sum(integer(n, 0, 2**64 - 1, "a duration") * _UNIT[u] for n, u in _DURATION.findall(text))


@lru_cache(maxsize=256)
def priority_value(hook: str, text: str) -> int | None:
    """A base chain's printed priority (`dstnat - 10`, `filter`, `-110`) -> its number, by asking
    the listing module which number it prints that way for the hook."""
    text = " ".join(text.split())
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return next((p for p in range(-1000, 1001) if priority_text(BaseHook("filter", hook, p)) == text), None)


class _Reader:
    def __init__(self, text: str, path: str):
        self.lines = text.splitlines()
        self.path = path
        self.n = 0  # current line number (1-based once reading)
        self.refs: list[tuple[int, str, str]] = []  # (line, chain or map, text) of the table's rules and elements

    def bad(self, msg: str, line: int | None = None) -> InputError:
        return InputError([Problem(self.path, f"line {line or self.n}", msg)])

    def next(self) -> str | None:
        """The next non-blank line without its `# handle N`, or None at the end."""
        while self.n < len(self.lines):
            self.n += 1
            line = _without_handle(self.lines[self.n - 1]).strip()
            if line:
                return line
        return None

    def truncated(self, what: str, start: int) -> InputError:
        return self.bad(f"the dump is truncated: {what} (line {start}) is not closed by '}}'; save the whole "
                        "output of nft list ruleset", len(self.lines))

    # -- tables ------------------------------------------------------------------------------------
    def read(self) -> NftDump:
        dump = NftDump(self.path, None)
        seen = False
        while (line := self.next()) is not None:
            if line.startswith("#"):  # iptables-nft's warnings
                continue
            m = re.fullmatch(r"table (\w+) (\S+) \{", line)
            if not m:
                raise self.bad(f"not a line of nft list ruleset: {line[:60]!r}; expected 'table FAMILY NAME {{'")
            seen = True
            name = f"{m[1]} {m[2]}"
            if name == KUBE_PROXY:
                if dump.table is not None:
                    raise self.bad("table ip kube-proxy appears twice; give the output of one nft list ruleset")
                dump.table = self.kube_proxy(dump.policies)
            elif m[1] in IPV4_FAMILIES:
                if any(t.name == name for t in dump.beside):
                    raise self.bad(f"table {name} appears twice; give the output of one nft list ruleset")
                other = self.other_table(name)
                if other is None:
                    dump.others.append(name)
                    dump.dormant.append(name)
                else:
                    dump.beside.append(other)
                    dump.before += dump.table is None
            else:
                self.skip(f"table {name}", 1)
                dump.others.append(name)
        if not seen:
            raise InputError([Problem(self.path, "", "no table in the dump; expected the output of nft list ruleset "
                                                     "or nft list table ip kube-proxy")])
        return dump

    def skip(self, what: str, depth: int) -> None:
        """Skip the body of a block that is not kube-proxy's (braces counted outside quotes)."""
        start = self.n
        while depth > 0:
            line = self.next()
            if line is None:
                raise self.truncated(what, start)
            d, closed = _balanced(line)
            if not closed:
                raise self.bad(f"unclosed quote in {what}: {line[:60]!r}")
            depth += d

    def kube_proxy(self, policies: dict[str, str]) -> Table:
        """Table ip kube-proxy, every rule checked as `nft -f` checks kube-proxy's."""
        return self.table(KUBE_PROXY, policies, None)

    def other_table(self, name: str) -> NftTable | None:
        """Another IPv4 table, read as nft prints any table: its chains, sets and maps; other objects
        (flowtables, quotas, ct helpers, ...) named and passed over; None when it is dormant (`flags
        dormant`: its chains see no packet)."""
        policies: dict[str, str] = {}
        passed: list[str] = []
        t = self.table(name, policies, passed)
        return None if "dormant" in passed else NftTable(name, t, policies, "", tuple(passed))

    def table(self, label: str, policies: dict[str, str], passed: list[str] | None) -> Table:
        """A table's body; `passed` None: kube-proxy's (strict), else collects what was passed over."""
        t = Table()
        start, self.refs = self.n, []
        while True:
            line = self.next()
            if line is None:
                raise self.truncated(f"table {label}", start)
            if line == "}":
                self.check_references(t, label, {p.rsplit(" ", 1)[-1] for p in passed or ()})
                return t
            if line.startswith("comment "):
                t.comment = self.comment(line)
                continue
            if passed is not None and line.startswith("flags "):
                passed += [f.strip() for f in line[len("flags "):].split(",") if f.strip() == "dormant"]
                continue
            m = re.fullmatch(r"(chain|set|map|counter) (\S+) \{", line)
            if m is None and passed is not None and (o := re.fullmatch(r"([a-z]+(?: [a-z]+)?) (\S+) \{", line)):
                self.skip(f"{o[1]} {o[2]}", 1)
                passed.append(f"{o[1]} {o[2]}")
                continue
            if m is None:
                raise self.bad(f"not a line of table {label}: {line[:60]!r}; expected chain, set, map or "
                               "counter NAME {")
            kind, name = m[1], m[2]
            if name in (t.counters if kind == "counter" else {**t.chains, **t.sets}):
                raise self.bad(f"{kind} {name} appears twice in table {label}")
            if kind == "counter":
                t.counters[name] = self.counter(name)
            elif kind == "chain":
                t.chains[name] = self.chain(name, policies, passed is None)
            else:
                t.sets[name] = self.set(kind, name)

    def comment(self, line: str) -> str:
        m = re.fullmatch(r'comment ("(?:[^"\\]|\\.)*")', line)
        if m is None:
            raise self.bad(f"comment without its closing quote: {line[:60]!r}")
        return _unquote(m[1])

    def chain(self, name: str, policies: dict[str, str], strict: bool = True) -> Chain:
        c, start = Chain(name), self.n
        while True:
            line = self.next()
            if line is None:
                raise self.truncated(f"chain {name}", start)
            if line == "}":
                return c
            if line.startswith("type ") and not c.rules:
                m = _HOOK.match(line)
                prio = priority_value(m[2], m[3]) if m else None
                if m is None or prio is None:
                    raise self.bad(f"base chain {name}: cannot read {line!r}; expected 'type T hook H priority P; "
                                   "policy accept;'")
                c.hook = BaseHook(m[1], m[2], prio)
                policies[name] = m[4] or "accept"
            elif line.startswith("comment ") and not c.rules:
                c.comment = self.comment(line)
            else:
                c.rules.append(self.rule(name, line, strict))

    def rule(self, chain: str, line: str, strict: bool = True) -> Rule:
        depth, closed = _balanced(line)
        if not closed or depth:
            raise self.bad(f"rule of chain {chain} is cut short (an unclosed {'quote' if not closed else 'brace'}): "
                           f"{line[:80]!r}")
        at = line.rfind(' comment "')  # a comment cannot hold an unescaped quote: the last one is the comment
        m = _QUOTED.fullmatch(line, at + 9) if at > 0 else None
        rule = Rule(chain, line[:at], _unquote(m[0])) if m else Rule(chain, line)
        try:
            if strict:  # another table's rules may use any expression nft has; the walker reads or names them
                check_rule(rule.text)
        except ValueError as e:
            raise self.bad(f"rule of chain {chain}: {e}") from None
        self.refs.append((self.n, chain, rule.text))
        return rule

    def timeout(self, what: str, text: str) -> int:
        """A set's `timeout` line as seconds; InputError naming the line when it is not a duration nft prints."""
        try:
            seconds = duration_seconds(text)
        except ValueError as e:
            raise self.bad(f"timeout of {what}: {e}") from None
        if seconds is None:
            raise self.bad(f"timeout of {what}: {text[:40]!r} is not a duration; expected e.g. 3h or 1m30s")
        return seconds

    def check_references(self, t: Table, label: str = KUBE_PROXY, objects: AbstractSet[str] = frozenset()) -> None:
        """Every chain a rule or map element jumps to and every set it names is in the table (nft
        guarantees it, so a dump where one is not was cut or edited)."""
        via: dict[str, list[tuple[str, int]]] = {}  # a verdict map -> the chains its elements jump to
        uses: dict[str, dict[str, int]] = {}  # a chain -> the verdict maps its rules look up (at which line)
        jumps: dict[str, list[tuple[str, int]]] = {}  # a chain -> the chains it jumps to (itself or by a map)
        for line, owner, text in self.refs:
            for verb, name in re.findall(r"\b(jump|goto) ([^\s,}]+)", text):
                if name not in t.chains:
                    raise self.bad(f"{verb} {name}: no chain {name} in table {label} (the dump is cut short or "
                                   "edited)", line)
                (via if owner in t.sets else jumps).setdefault(owner, []).append((name, line))
            for name, raw in re.findall(r"@([^\s,}]+)(,\d+)?", text):
                if raw:  # a raw payload expression (@th,16,16), not a set
                    continue
                if name not in t.sets and name not in objects:  # objects: another table's flowtables, ...
                    raise self.bad(f"@{name}: no set or map {name} in table {label} (the dump is cut short or "
                                   "edited)", line)
                uses.setdefault(owner, {}).setdefault(name, line)
        for chain, maps in uses.items():
            for name, line in maps.items():
                jumps.setdefault(chain, []).extend((target, line) for target, _ in via.get(name, ()))
        wrong = loop_or_depth(jumps, MAX_DEPTH, "the kernel nests jumps (NFT_JUMP_STACK_SIZE)")
        if wrong:
            raise self.bad(f"table {label}: {wrong[0]}", wrong[1])

    def counter(self, name: str) -> Counter:
        """A named counter (1.37+): its `packets N bytes M` line (and a comment) are read past, as
        traffic changes them."""
        start = self.n
        while True:
            line = self.next()
            if line is None:
                raise self.truncated(f"counter {name}", start)
            if line == "}":
                return Counter(name)
            if line.startswith("comment "):
                self.comment(line)
            elif not re.fullmatch(r"packets \d+ bytes \d+", line):
                raise self.bad(f"not a line of counter {name}: {line[:60]!r}; expected 'packets N bytes M'")

    def set(self, kind: str, name: str) -> NSet:
        s, start = NSet(kind, name, ""), self.n
        while True:
            line = self.next()
            if line is None:
                raise self.truncated(f"{kind} {name}", start)
            if line == "}":
                break
            if line.startswith("elements = {"):
                s.elements = self.elements(s, line[len("elements = "):])
            elif line.startswith("type ") or line.startswith("typeof "):
                s.type = line if line.startswith("typeof ") else line[len("type "):]
            elif line.startswith("flags "):
                s.flags = tuple(f.strip() for f in line[len("flags "):].split(","))
            elif line.startswith("timeout "):
                s.timeout = self.timeout(f"{kind} {name}", line[len("timeout "):])
            elif line.startswith("comment "):
                s.comment = self.comment(line)
            elif not line.startswith(_SET_PROPS):
                raise self.bad(f"not a line of {kind} {name}: {line[:60]!r}; expected type, flags, timeout, comment "
                               "or elements = { ... }")
        if not s.type:
            raise self.bad(f"{kind} {name} has no type line", start)
        return s

    def elements(self, s: NSet, first: str) -> list[Element]:
        start, parts = self.n, [first]
        depth, closed = _balanced(first)
        while depth != 0 or not closed:  # each line is scanned once, from the state the lines before left
            line = self.next()
            if line is None:
                raise self.truncated(f"the elements of {s.kind} {s.name}", start)
            parts.append(line)
            depth, closed = _balanced(line, depth, not closed)
        text = " ".join(parts)
        if not (text.startswith("{") and text.endswith("}")):
            raise self.bad(f"elements of {s.kind} {s.name} do not end with '}}': {text[-40:]!r}")
        parts = len(s.type.split(" : ")[0].split(" . "))
        out = []
        for item in _split_top(text[1:-1].strip()):
            got = _element(item)
            key = tuple(k.strip() for k in got[0].split(" . ")) if got else ()
            if got is None or len(key) != parts or (s.kind == "map") != (got[2] is not None):
                want = f"{parts}-part key{' : verdict' if s.kind == 'map' else ''}"
                raise self.bad(f"element {item[:60]!r} of {s.kind} {s.name} is garbled; expected a {want}")
            try:
                check_element(s.type, key, got[2])
            except ValueError as e:
                raise self.bad(f"{s.kind} {s.name}: {e}") from None
            out.append(Element(s.name, key, got[2], got[1], s.kind))
            if got[2]:
                self.refs.append((self.n, s.name, got[2]))
        return out


def parse_nft(text: str, path: str) -> NftDump:
    """The tables of an `nft list ruleset` (or `nft list table ...`) dump, `-a` handles allowed, or of
    `nft -j list ruleset` (JSON, told by its first character)."""
    if not text.lstrip().startswith("{"):
        return _Reader(text, path).read()
    listing, where = ruleset_text(text, path)
    try:
        dump = _Reader(listing, path).read()
    except InputError as e:
        raise InputError([_element_problem(p, where) for p in e.problems]) from None
    unread = ("kpemu reads only table ip kube-proxy's rules from nft -j list ruleset; give nft list ruleset to walk "
              "this table's")
    return replace(dump, form=JSON_FORM, beside=[replace(t, unread=unread) for t in dump.beside])


def _element_problem(p: Problem, where: dict[int, tuple[int, str]]) -> Problem:
    """A problem of the text made from JSON, naming the JSON element its line came from."""
    m = re.fullmatch(r"line (\d+)", p.path)
    if m is None or int(m[1]) not in where:
        return p
    i, what = where[int(m[1])]
    return replace(p, path=f"nftables[{i}] ({what})")


def listed(table: Table) -> Table:
    """A generated table with its rules in nft's listing form (what a dump of it shows)."""
    chains = {n: replace(c, rules=[replace(r, text=rule_text(r.text)) for r in c.rules])
              for n, c in table.chains.items()}
    return replace(table, chains=chains)
