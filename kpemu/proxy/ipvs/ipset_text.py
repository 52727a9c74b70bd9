"""ipsets as kube-proxy creates them, and the text of `ipset restore` / `ipset save` for them.

Facts checked against ipset v7.17 on kernel 6.x (sets created with `ipset restore` in a
throwaway namespace, read back with `ipset save`):

- hash types print `create NAME TYPE family inet hashsize 1024 maxelem 65536 bucketsize 12
  initval 0x<random>`; the kernel picks `initval` at random per set, so the canonical form drops
  it (and only it). `bitmap:port` prints `create NAME bitmap:port range 0-65535`.
- members print as `add NAME 192.168.96.3,tcp:9153` (hash:ip,port), `...,tcp:80,192.168.97.5`
  (hash:ip,port,ip), `...,tcp:80,198.51.100.0/24` with a /32 printed as a bare address
  (hash:ip,port,net), `30080` (bitmap:port, ascending), `10.96.0.1` (hash:ip).
- hash sets print their members in hash-bucket order, which depends on initval; sets print in
  creation order. The canonical form therefore sorts members (`member_sort_key`), and kpemu
  creates sets in the order of reference section 3.1 (kube-proxy itself iterates a Go map).
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

HASH_OPTIONS = "family inet hashsize 1024 maxelem 65536"
BITMAP_OPTIONS = "range 0-65535"
# What `ipset save` appends to a hash set's options on kernels with bucketsize support (5.11+).
SAVE_HASH_EXTRA = "bucketsize 12"
_PROTOCOLS = ("sctp", "tcp", "udp")
_INITVAL = re.compile(r" initval 0x[0-9a-f]+")


@dataclass(frozen=True)
class IpSet:
    """One ipset: name, type, creation options, the comment kube-proxy uses in iptables, members."""

    name: str
    type: str  # hash:ip,port | hash:ip,port,ip | hash:ip,port,net | bitmap:port | hash:ip
    comment: str
    members: tuple[str, ...] = ()  # canonical order (member_sort_key)

    @property
    def options(self) -> str:
        """Creation options as kube-proxy passes them (createSet / setIPSetDefaults)."""
        return BITMAP_OPTIONS if self.type.startswith("bitmap:") else HASH_OPTIONS

    @property
    def saved_options(self) -> str:
        """Options as `ipset save` prints them back (initval dropped, see module docstring)."""
        if self.type.startswith("bitmap:"):
            return self.options
        return f"{self.options} {SAVE_HASH_EXTRA}"

    @property
    def is_empty(self) -> bool:
        return not self.members


def member_sort_key(member: str) -> tuple[object, ...]:
    """Numeric order: addresses by value, `proto:port` by (proto, port), ports as integers."""
    key: list[object] = []
    for part in member.split(","):
        proto, sep, port = part.partition(":")
        if sep and proto in _PROTOCOLS:
            key.append((1, proto, int(port)))
        elif part.isdigit():
            key.append((0, "", int(part)))
        else:
            net = ipaddress.ip_network(part, strict=False)
            key.append((2, str(int(net.network_address)).zfill(39), net.prefixlen))
    return tuple(key)


def saved_member(set_type: str, member: str) -> str:
    """A member as `ipset save` prints it (a /32 in a hash:...,net set loses its prefix)."""
    if set_type.endswith(",net") and member.endswith("/32"):
        return member[: -len("/32")]
    return member


def make_set(name: str, set_type: str, comment: str, members: set[str] | list[str]) -> IpSet:
    """An IpSet with its members de-duplicated and put in canonical order."""
    return IpSet(name, set_type, comment, tuple(sorted(set(members), key=member_sort_key)))


def restore_input(sets: tuple[IpSet, ...] | list[IpSet]) -> str:
    """`ipset restore` input creating every set and adding its members."""
    lines: list[str] = []
    for s in sets:
        lines.append(f"create {s.name} {s.type} {s.options}")
        lines.extend(f"add {s.name} {m}" for m in s.members)
    return "\n".join(lines) + "\n"


def save_text(sets: tuple[IpSet, ...] | list[IpSet]) -> str:
    """Canonical `ipset save` text for these sets (see `canonical_save` for the real output)."""
    lines: list[str] = []
    for s in sets:
        lines.append(f"create {s.name} {s.type} {s.saved_options}")
        lines.extend(f"add {s.name} {saved_member(s.type, m)}" for m in s.members)
    return "\n".join(lines) + "\n"


def canonical_save(text: str) -> str:
    """Real `ipset save` output in canonical form: no initval, members sorted within each set."""
    out: list[str] = []
    pending: list[str] = []

    def flush() -> None:
        pending.sort(key=lambda line: member_sort_key(line.split(" ", 2)[2]))
        out.extend(pending)
        pending.clear()

    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("add "):
            pending.append(line)
            continue
        flush()
        out.append(_INITVAL.sub("", line))
    flush()
    return "\n".join(out) + "\n"
