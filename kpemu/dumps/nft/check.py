"""The checks `nft -f` makes of what kube-proxy's table holds, made as each rule and element is read:
addresses with their prefix after `ip saddr` / `ip daddr`, ports and port ranges after `dport` /
`sport`, `dnat to ADDR[:PORT]`, marks and masks (32-bit), `numgen random mod N` with N >= 1 (the
kernel refuses 0: ERANGE) and its arms `INT : VERDICT` (or `INT : ADDR . PORT`), no number longer
than 20 digits, and every element's key parts by the set's type.

Each check raises ValueError saying what was expected; kpemu.dumps.nft.read adds the file and the line.
"""

from __future__ import annotations

import re

from kpemu.dumps import values

_PROTOS = frozenset(("tcp", "udp", "sctp", "udplite", "icmp", "icmpv6", "esp", "ah", "gre"))
_VERDICTS = frozenset(("accept", "drop", "return", "continue", "reject", "queue"))
_NUMGEN = re.compile(r"numgen random mod (\S+) (vmap|map) \{ ([^{}]*) \}")


def _addr_or_net(tok: str) -> None:
    """An address, a network or an `A-B` range of addresses."""
    for part in tok.split("-", 1):
        values.ipv4_net(part)


def _proto(tok: str) -> None:
    if tok not in _PROTOS and not (tok.isdigit() and values.integer(tok, 0, 255, "a protocol number") >= 0):
        raise ValueError(f"{tok[:40]!r} is not a protocol (tcp, udp, sctp or 0-255)")


def verdict(text: str) -> None:
    """accept, drop, return, continue, or `jump CHAIN` / `goto CHAIN`."""
    word, _, target = text.partition(" ")
    if word in ("jump", "goto") and target and " " not in target:
        return
    if text not in _VERDICTS:
        raise ValueError(f"{text[:60]!r} is not a verdict (accept, drop, return, jump CHAIN, goto CHAIN)")


def _numgen(m: re.Match[str]) -> None:
    mod = values.integer(m[1], 1, 0xFFFFFFFF, "numgen's modulus (the kernel refuses 0)")
    for arm in m[3].split(","):
        key, colon, value = arm.strip().partition(" : ")
        if not colon:
            want = "VERDICT" if m[2] == "vmap" else "ADDR . PORT"
            raise ValueError(f"numgen arm {arm.strip()[:40]!r}: expected INT : {want}")
        if values.integer(key, 0, 0xFFFFFFFF, "a numgen arm") >= mod:
            raise ValueError(f"numgen arm {key}: numgen random mod {mod} gives 0-{mod - 1}")
        if m[2] == "vmap":
            verdict(value.strip())
        else:
            addr, dot, port = value.partition(" . ")
            values.ipv4(addr.strip())
            if dot:
                values.port(port.strip())


def check_rule(text: str) -> None:
    """Every value of one rule (its text without the comment) is one `nft -f` accepts."""
    for m in _NUMGEN.finditer(text):
        _numgen(m)
    toks = text.split()
    for i, tok in enumerate(toks):
        nxt = toks[i + 1] if i + 1 < len(toks) else ""
        if nxt in ("!=", "=="):
            nxt = toks[i + 2] if i + 2 < len(toks) else ""
        if tok.isdigit() or tok.startswith("0x"):
            values.integer(tok, 0, 0xFFFFFFFFFFFFFFFF, "a number")
        if tok in ("saddr", "daddr") and i > 0 and toks[i - 1] == "ip" and nxt != "." \
                and (nxt[:1].isdigit() or "." in nxt) and not nxt.startswith(("@", "{")):
            _addr_or_net(nxt)
        elif tok in ("dport", "sport") and nxt[:1].isdigit():
            values.port_range(nxt, "-")
        elif tok == "to" and nxt and nxt != "numgen":
            addr, colon, port = nxt.rpartition(":")
            values.ipv4(addr if colon else nxt)
            if colon:
                values.port(port)
        elif tok in ("mark", "&", "or", "xor", "and", "|", "^") and nxt.startswith("0x"):
            values.mark(nxt)
        elif tok == "mod" and nxt and not _NUMGEN.search(text):
            values.integer(nxt, 1, 0xFFFFFFFF, "numgen's modulus (the kernel refuses 0)")


_PART = {"ipv4_addr": _addr_or_net, "inet_service": lambda v: values.port_range(v, "-"), "inet_proto": _proto,
         "mark": values.mark, "ip daddr": _addr_or_net, "ip saddr": _addr_or_net, "th dport": lambda v:
         values.port_range(v, "-"), "meta l4proto": _proto}


def check_element(set_type: str, key: tuple[str, ...], value: str | None) -> None:
    """An element's key parts (and a verdict map's verdict) by the set's `type A . B : verdict`."""
    head, _, tail = set_type.removeprefix("typeof ").partition(" : ")
    for kind, part in zip((k.strip() for k in head.split(" . ")), key, strict=False):
        check = _PART.get(kind)
        if check is not None:
            try:
                check(part)
            except ValueError as e:
                raise ValueError(f"element key {' . '.join(key)[:60]!r}: {e}") from None
    if value is not None and tail.strip() == "verdict":
        verdict(value)
