"""What `nft list table ip kube-proxy` prints for a table (nft 1.0.6 formatting).

The deploy reads the table back from the kernel and compares it with this text line by line.
Listing rules (observed with nft 1.0.6, reference section 4.5): named counters (as loaded: no
packet counted yet), sets and maps, then chains, each in creation order, separated by blank
lines; base chains print named priorities (`dstnat - 10`) where nft knows one for that hook;
set elements are sorted by key value, two addresses per line, one concatenated or map element
per line; expressions print in nft's canonical form (`mark set mark or M` -> `meta mark set
meta mark | M`, a one-element anonymous set loses its braces, `,` separators lose the space
before them).
"""

from __future__ import annotations

import ipaddress
import re

from kpemu.proxy.naming import go_hex
from kpemu.proxy.nftables.tx import BaseHook, Chain, Element, NSet, Table, quote

# (name, value, hooks it is printed for; None = every hook), nft's std_prios for family ip.
_STD_PRIOS = (("raw", -300, None), ("mangle", -150, None), ("dstnat", -100, ("prerouting",)),
              ("filter", 0, None), ("security", 50, None), ("srcnat", 100, ("postrouting",)))
_PROTO_NUM = {"tcp": 6, "udp": 17, "sctp": 132}
_ELEMENT_WRAP = ",\n\t\t\t     "


def priority_text(hook: BaseHook) -> str:
    """nft's prio2str: a standard name (with an offset up to +-10) where valid for the hook."""
    for name, value, hooks in _STD_PRIOS:
        if hooks is not None and hook.hook not in hooks:
            continue
        off = hook.priority - value
        if off == 0:
            return name
        if abs(off) <= 10:
            return f"{name} {'+' if off > 0 else '-'} {abs(off)}"
    return str(hook.priority)


def duration_text(seconds: int) -> str:
    """nft's time format: 10800 -> 3h, 90 -> 1m30s."""
    out = ""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        n, seconds = divmod(seconds, size)
        if n:
            out += f"{n}{unit}"
    return out or "0s"


def _anon_set(m: re.Match[str]) -> str:
    items = [i.strip() for i in m.group(2).split(",")]
    if len(items) == 1:
        return f"{m.group(1)}{items[0]}"
    items.sort(key=lambda i: int(ipaddress.IPv4Network(i, strict=False).network_address))
    return f"{m.group(1)}{{ {', '.join(items)} }}"


_MARK_OP = {"or": "|", "xor": "^"}


def rule_text(text: str) -> str:
    """A rule as kube-proxy writes it -> as nft lists it (mark statements and tests anywhere in the
    rule, since 1.36 writes them inline; `dnat ip addr . port to <map>` lists as `dnat ip to`;
    interface names quoted)."""
    t = re.sub(r"(?<!meta )\bmark set mark (or|xor) (0x[0-9a-f]+)",
               lambda m: f"meta mark set meta mark {_MARK_OP[m[1]]} {go_hex(int(m[2], 16))}", text)
    t = re.sub(r"(?<!meta )\bmark and (0x[0-9a-f]+) (==|!=) 0\b",
               lambda m: f"meta mark & {go_hex(int(m[1], 16))} {m[2]} 0x00000000", t)
    t = t.replace(" dnat ip addr . port to numgen ", " dnat ip to numgen ")
    t = re.sub(r"(ip [sd]addr (?:!= )?)\{ ([^}]*) \}", _anon_set, t)
    t = re.sub(r"\b((?:iif|oif)name (?:!= )?)([^\s\"{]+)", r'\1"\2"', t)  # nft lists names as strings
    return t.replace(" , ", ", ")


def _raw(part: str) -> bytes:
    """A key component as the kernel stores it in a concatenation (32-bit registers)."""
    if part in _PROTO_NUM:
        return bytes([_PROTO_NUM[part], 0, 0, 0])
    if part.isdigit():
        return int(part).to_bytes(2, "big") + b"\0\0"
    return ipaddress.IPv4Network(part, strict=False).network_address.packed


def _element_key(e: Element) -> int:
    """nft sorts listed elements by the key's value: a single address numerically, a concatenation
    as its register bytes read as one little-endian number (so the last component decides first)."""
    if len(e.key) == 1:
        return int.from_bytes(_raw(e.key[0]), "big")
    return int.from_bytes(b"".join(_raw(p) for p in e.key), "little")


def _elements(s: NSet) -> str:
    elems = s.elements if "interval" in s.flags else sorted(s.elements, key=_element_key)
    simple = s.kind == "set" and " . " not in s.type
    out, count = [], 0
    for i, e in enumerate(elems):
        if i:
            count += 1
            out.append(", " if simple and count < 2 else _ELEMENT_WRAP)
            if simple and count >= 2:
                count = 0
        out.append(e.body())
    return "{ " + "".join(out) + " }"


def set_properties(s: NSet) -> list[str]:
    """A set's or map's properties as `nft list` prints them: type, flags, timeout, comment."""
    props = [f"type {s.type}"]
    if s.flags:
        props.append(f"flags {','.join(s.flags)}")
    if s.timeout is not None:
        props.append(f"timeout {duration_text(s.timeout)}")
    if s.comment is not None:
        props.append(f"comment {quote(s.comment)}")
    return props


def _set_lines(s: NSet) -> list[str]:
    kind, *rest = set_properties(s)
    size = ["size 65535"] if "dynamic" in s.flags else []  # the kernel gives dynamic sets a default size
    lines = [f"\t{s.kind} {s.name} {{", *(f"\t\t{p}" for p in (kind, *size, *rest))]
    if s.elements:
        lines.append(f"\t\telements = {_elements(s)}")
    return [*lines, "\t}"]


def _chain_lines(c: Chain) -> list[str]:
    lines = [f"\tchain {c.name} {{"]
    if c.hook:
        lines.append(f"\t\ttype {c.hook.type} hook {c.hook.hook} priority {priority_text(c.hook)}; policy accept;")
    if c.comment is not None:
        lines.append(f"\t\tcomment {quote(c.comment)}")
    for r in c.rules:
        tail = f" comment {quote(r.comment)}" if r.comment is not None else ""
        lines.append(f"\t\t{rule_text(r.text)}{tail}")
    return [*lines, "\t}"]


def listing(table: Table) -> str:
    """The text of `nft list table ip kube-proxy` for `table`."""
    counters = [[f"\t{c.kind} {c.name} {{", "\t\tpackets 0 bytes 0", "\t}"] for c in table.counters.values()]
    blocks = counters + [_set_lines(s) for s in table.sets.values()] + [_chain_lines(c) for c in table.chains.values()]
    head = ["table ip kube-proxy {"]
    if table.comment is not None:
        head.append(f"\tcomment {quote(table.comment)}")
    body: list[str] = []
    for i, b in enumerate(blocks):
        if i:
            body.append("")
        body += b
    return "\n".join([*head, *body, "}"]) + "\n"


def without_interval_order(text: str) -> str:
    """A listing with the elements of interval sets (1.29's firewall-allow) in text order: the kernel
    lists those in its own order (not by key), so read-backs compare them as a set."""
    lines = text.split("\n")
    out: list[str] = []
    i, interval = 0, False
    while i < len(lines):
        line = lines[i]
        if line.startswith("\tset ") or line.startswith("\tmap "):
            interval = False
        if line.strip() == "flags interval":
            interval = True
        if interval and line.startswith("\t\telements = { "):
            block = [line]
            while not block[-1].endswith(" }"):
                i += 1
                block.append(lines[i])
            body = " ".join(b.strip() for b in block)[len("elements = { "):-2]
            items = sorted(x.strip() for x in body.split(","))
            out.append("\t\telements = { " + _ELEMENT_WRAP.join(items) + " }")
        else:
            out.append(line)
        i += 1
    return "\n".join(out)
