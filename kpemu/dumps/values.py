"""Values of a node's dumps checked as they are read: each function returns the value it accepts or
raises ValueError saying what was expected (the readers add the file, line and field), so nothing a
dump holds can raise later, where it is used.

The bounds are the ones the tools themselves keep: ports 0-65535, marks and masks 32-bit,
probabilities finite in [0, 1], IPv4 addresses with a prefix 0-32, and no number longer than
`MAX_DIGITS` digits (every number in these dumps fits in 64 bits).
"""

from __future__ import annotations

import ipaddress
import math

MAX_DIGITS = 20


def _digits(text: str) -> str:
    if len(text) > MAX_DIGITS + 2:
        raise ValueError(f"{text[:24]}...: a number of {len(text)} characters (at most {MAX_DIGITS} digits)")
    return text


def integer(text: str, lo: int, hi: int, what: str = "a number") -> int:
    """A decimal (or 0x hex) integer in [lo, hi]."""
    _digits(text)
    try:
        v = int(text, 0) if text.lower().startswith("0x") else int(text, 10)
    except ValueError:
        raise ValueError(f"{text!r} is not {what}") from None
    if not lo <= v <= hi:
        raise ValueError(f"{text!r} is out of range: {what} is {lo}-{hi}")
    return v


def port(text: str) -> int:
    """A port number 0-65535."""
    return integer(text, 0, 65535, "a port (0-65535)")


def port_range(text: str, sep: str = ":") -> tuple[int, int]:
    """`PORT` or `LO<sep>HI` (iptables' 1000:2000, nft's 1000-2000), LO <= HI."""
    lo, _, hi = text.partition(sep)
    a = port(lo) if lo else 0
    b = port(hi) if hi else (65535 if _ else a)
    if a > b:
        raise ValueError(f"{text!r}: the range's first port is above its last")
    return a, b


def mark(text: str) -> int:
    """A 32-bit mark or mask (decimal, 0x hex)."""
    return integer(text, 0, 0xFFFFFFFF, "a 32-bit mark")


def mark_mask(text: str) -> tuple[int, int]:
    """`VALUE[/MASK]` (the mask defaults to 0xffffffff)."""
    v, slash, m = text.partition("/")
    return mark(v), mark(m) if slash else 0xFFFFFFFF


def probability(text: str) -> float:
    """A probability: a finite number in [0, 1]."""
    if len(text) > 2 * MAX_DIGITS:
        raise ValueError(f"{text[:24]}...: a probability of {len(text)} characters")
    try:
        p = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a probability") from None
    if not math.isfinite(p) or not 0.0 <= p <= 1.0:
        raise ValueError(f"{text!r} is out of range: a probability is 0-1")
    return p


def ipv4(text: str) -> str:
    """A dotted IPv4 address (kpemu models IPv4)."""
    try:
        return str(ipaddress.IPv4Address(text))
    except ValueError:
        raise ValueError(f"{text[:60]!r} is not an IPv4 address") from None


def ipv4_net(text: str) -> str:
    """An IPv4 address or network: ADDR, ADDR/PREFIX (0-32) or ADDR/MASK (a bare ADDR comes back as it is)."""
    if "/" not in text:
        return ipv4(text)
    try:
        return str(ipaddress.IPv4Network(text, strict=False))
    except ValueError:
        raise ValueError(f"{text[:60]!r} is not an IPv4 address or network (ADDR[/0-32])") from None


def host_port(text: str) -> tuple[str, int]:
    """`ADDR:PORT` with an IPv4 address."""
    addr, colon, p = text.rpartition(":")
    if not colon:
        raise ValueError(f"{text[:60]!r}: expected ADDR:PORT")
    return ipv4(addr), port(p)

