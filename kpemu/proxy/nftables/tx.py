"""An nftables transaction as knftables writes it, and the table it leaves behind.

`Transaction` records operations in order and renders each as the line knftables'
`writeOperation` produces (`add chain ip kube-proxy X { type ... ; }`, `add element ... { k . k
comment "c" : v }`, ...). Applying the operations to an empty table (`Transaction.table()`) gives
the objects that exist afterwards: what `nft list table` shows and what knftables' fake `Dump()`
prints, which is what kube-proxy's unit tests compare.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FAMILY, TABLE = "ip", "kube-proxy"
_PREFIX = f"{FAMILY} {TABLE}"


def quote(text: str) -> str:
    """Go's %q for the plain ASCII comments kube-proxy writes."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


@dataclass(frozen=True)
class BaseHook:
    """A base chain's `type T hook H priority P`."""

    type: str
    hook: str
    priority: int


@dataclass
class Rule:
    """One rule: its text as kube-proxy writes it (without the comment) and its comment."""

    chain: str
    text: str
    comment: str | None = None

    def commented(self) -> str:
        """The rule's text with its comment, as nft takes and lists it."""
        return self.text + (f" comment {quote(self.comment)}" if self.comment is not None else "")

    def line(self) -> str:
        return f"add rule {_PREFIX} {self.chain} {self.commented()}"


@dataclass
class Chain:
    """A chain: base-chain hook (or None), comment, rules in order."""

    name: str
    hook: BaseHook | None = None
    comment: str | None = None
    rules: list[Rule] = field(default_factory=list)

    def line(self) -> str:
        props = []
        if self.hook:
            props.append(f"type {self.hook.type} hook {self.hook.hook} priority {self.hook.priority} ;")
        if self.comment is not None:
            props.append(f"comment {quote(self.comment)} ;")
        body = f" {{ {' '.join(props)} }}" if props else ""
        return f"add chain {_PREFIX} {self.name}{body}"


@dataclass
class Element:
    """A set element (value None) or map element: key parts, optional comment, value."""

    container: str
    key: tuple[str, ...]
    value: str | None = None
    comment: str | None = None
    kind: str = "set"

    def body(self) -> str:
        """`key [comment "c"] [: value]`, as nft takes and lists it."""
        text = " . ".join(self.key)
        if self.comment is not None:
            text += f" comment {quote(self.comment)}"
        if self.value is not None:
            text += f" : {self.value}"
        return text

    def line(self) -> str:
        return f"add element {_PREFIX} {self.container} {{ {self.body()} }}"


@dataclass
class NSet:
    """A named set or map (`kind` "set" / "map")."""

    kind: str
    name: str
    type: str
    flags: tuple[str, ...] = ()
    timeout: int | None = None
    comment: str | None = None
    elements: list[Element] = field(default_factory=list)

    def line(self) -> str:
        props = [f"type {self.type} ;"]
        if self.flags:
            props.append(f"flags {','.join(self.flags)} ;")
        if self.timeout is not None:
            props.append(f"timeout {self.timeout}s ;")
        if self.comment is not None:
            props.append(f"comment {quote(self.comment)} ;")
        return f"add {self.kind} {_PREFIX} {self.name} {{ {' '.join(props)} }}"


@dataclass
class Counter:
    """A named counter (1.37+: the localhost NodePort rejects count through them)."""

    name: str
    kind: str = "counter"

    def line(self) -> str:
        return f"add counter {_PREFIX} {self.name}"


@dataclass
class Table:
    """The objects of table ip kube-proxy, in creation order."""

    comment: str | None = None
    chains: dict[str, Chain] = field(default_factory=dict)
    sets: dict[str, NSet] = field(default_factory=dict)  # sets and maps share one namespace
    counters: dict[str, Counter] = field(default_factory=dict)

    def table_line(self) -> str:
        tail = f" {{ comment {quote(self.comment)} ; }}" if self.comment is not None else ""
        return f"add table {_PREFIX}{tail}"

    def dump(self) -> str:
        """Every object as one `add` line, like knftables' fake Dump(): table, chains, sets, maps,
        counters, rules, then elements (no flush or delete lines)."""
        lines = [self.table_line()]
        lines += [c.line() for c in sorted(self.chains.values(), key=lambda c: c.name)]
        ordered = sorted(self.sets.values(), key=lambda s: (s.kind != "set", s.name))
        lines += [s.line() for s in ordered]
        lines += [self.counters[n].line() for n in sorted(self.counters)]
        lines += [r.line() for c in sorted(self.chains.values(), key=lambda c: c.name) for r in c.rules]
        lines += [e.line() for s in ordered for e in s.elements]
        return "\n".join(lines) + "\n"


@dataclass
class Op:
    """One line of the transaction: the verb, the object kind and the object."""

    verb: str  # add, flush, delete
    kind: str  # table, chain, set, map, counter, rule, element
    obj: Table | Chain | NSet | Counter | Rule | Element

    def line(self) -> str:
        if self.verb == "add":
            return self.obj.table_line() if isinstance(self.obj, Table) else self.obj.line()
        name = self.obj.name  # type: ignore[union-attr]
        return f"{self.verb} {self.kind} {_PREFIX} {name}"


class Transaction:
    """An ordered list of operations, rendered as the `nft -f` input kube-proxy sends."""

    def __init__(self) -> None:
        self.ops: list[Op] = []

    def add_table(self, comment: str | None) -> None:
        self.ops.append(Op("add", "table", Table(comment=comment)))

    def add_chain(self, name: str, hook: BaseHook | None = None, comment: str | None = None) -> None:
        self.ops.append(Op("add", "chain", Chain(name, hook, comment)))

    def add_set(self, kind: str, name: str, type_: str, *, flags: tuple[str, ...] = (),
                timeout: int | None = None, comment: str | None = None) -> None:
        self.ops.append(Op("add", kind, NSet(kind, name, type_, flags, timeout, comment)))

    def add_counter(self, name: str) -> None:
        self.ops.append(Op("add", "counter", Counter(name)))

    def add_rule(self, chain: str, text: str, comment: str | None = None) -> None:
        self.ops.append(Op("add", "rule", Rule(chain, text, comment)))

    def add_element(self, container: str, key: tuple[str, ...], value: str | None = None,
                    comment: str | None = None, kind: str = "set") -> None:
        self.ops.append(Op("add", "element", Element(container, key, value, comment, kind)))

    def flush(self, kind: str, name: str) -> None:
        self.ops.append(Op("flush", kind, _Named(name)))  # type: ignore[arg-type]

    def delete(self, kind: str, name: str) -> None:
        self.ops.append(Op("delete", kind, _Named(name)))  # type: ignore[arg-type]

    def text(self) -> str:
        """The transaction, one command per line, as `nft -f -` reads it."""
        return "".join(op.line() + "\n" for op in self.ops)

    def table(self) -> Table:
        """The table the transaction leaves when applied to a node without one."""
        t = Table()
        for op in self.ops:
            o = op.obj
            if op.verb == "add":
                if isinstance(o, Table):
                    t.comment = o.comment
                elif isinstance(o, Chain):
                    old = t.chains.get(o.name)
                    if old is None:
                        t.chains[o.name] = Chain(o.name, o.hook, o.comment)
                    else:  # re-adding an existing chain only fills in what the new line gives
                        old.hook, old.comment = o.hook or old.hook, o.comment or old.comment
                elif isinstance(o, NSet):
                    t.sets.setdefault(o.name, NSet(o.kind, o.name, o.type, o.flags, o.timeout, o.comment))
                elif isinstance(o, Counter):
                    t.counters.setdefault(o.name, Counter(o.name))
                elif isinstance(o, Rule):
                    t.chains[o.chain].rules.append(o)
                elif isinstance(o, Element):
                    elements = t.sets[o.container].elements
                    if all(e.key != o.key for e in elements):  # re-adding an element is a no-op
                        elements.append(o)
            elif op.verb == "flush":
                if op.kind == "chain":
                    t.chains[o.name].rules.clear()  # type: ignore[union-attr]
                else:
                    t.sets[o.name].elements.clear()  # type: ignore[union-attr]
            elif op.kind == "chain":
                t.chains.pop(o.name)  # type: ignore[union-attr]
            elif op.kind == "counter":
                t.counters.pop(o.name)  # type: ignore[union-attr]
            else:
                t.sets.pop(o.name)  # type: ignore[union-attr]
        return t


@dataclass(frozen=True)
class _Named:
    name: str


_OBJECT_ORDER = {"table": 10, "chain": 9, "rule": 8, "set": 7, "map": 6, "element": 5}  # anything else: 0


def sort_transaction(text: str) -> str:
    """kube-proxy's test helper sortNFTablesTransaction: drop blank and `#` lines, order by object
    type (table, chain, rule, set, map, element), then object name; rules keep their order,
    other lines sort by text."""
    lines = [ln for ln in text.split("\n") if ln and not ln.startswith("#")]

    def key(item: tuple[int, str]) -> tuple[int, str, int, str]:
        i, ln = item
        w = ln.split(" ")
        if len(w) < 5:
            return (-99, "", i, "")
        order = -_OBJECT_ORDER.get(w[1], 0)
        return (order, w[4], i if w[1] == "rule" else 0, "" if w[1] == "rule" else ln)

    return "\n".join(ln for _, ln in sorted(enumerate(lines), key=key))
