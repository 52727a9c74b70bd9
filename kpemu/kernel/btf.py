"""Byte offsets of kernel struct members from the kernel's own BTF (/sys/kernel/btf/vmlinux).

The drop tracer reads a few fields of the dropped packet's `struct sk_buff`; giving bpftrace their
offsets spares it parsing the whole BTF for casts (a second of CPU per run). Reading BTF is cheap
here: only the type section is walked, once per kernel (cached by release and BTF size).
"""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

VMLINUX = Path("/sys/kernel/btf/vmlinux")
CACHE_DIR = Path(os.environ.get("KPEMU_CACHE_DIR", "/run/kpemu"))
STRUCT, UNION = 4, 5
_MODIFIERS = {8, 9, 10, 11, 18}  # typedef, volatile, const, restrict, type tag: look through them
# extra bytes after the 12-byte type header, per kind: fixed, and per vlen entry
_FIXED = {1: 4, 3: 12, 14: 4, 17: 4}
_PER_ITEM = {4: 12, 5: 12, 6: 8, 13: 8, 15: 12, 19: 12}

# (struct, member path) the drop tracer reads
FIELDS = {
    "skb_dev": ("sk_buff", "dev"), "skb_head": ("sk_buff", "head"), "skb_nh": ("sk_buff", "network_header"),
    "skb_len": ("sk_buff", "len"), "dev_net": ("net_device", "nd_net"), "dev_ifindex": ("net_device", "ifindex"),
    "net_inum": ("net", "ns.inum"),
}


class BtfError(Exception):
    """The BTF could not be read or lacks a member."""


def _parse(data: bytes) -> tuple[list[tuple[int, int, int, int, list[tuple[int, int, int]]]], bytes]:
    magic, _ver, _flags, hdr_len, type_off, type_len, str_off, str_len = struct.unpack_from("<HBBIIIII", data)
    if magic != 0xEB9F:
        raise BtfError("not BTF (bad magic)")
    strings = data[hdr_len + str_off: hdr_len + str_off + str_len]
    pos, end = hdr_len + type_off, hdr_len + type_off + type_len
    types: list = [(0, 0, 0, 0, [])]  # type id 0 is void
    while pos < end:
        name_off, info, size_or_type = struct.unpack_from("<III", data, pos)
        kind, vlen, kflag = (info >> 24) & 0x1F, info & 0xFFFF, info >> 31
        pos += 12
        members: list[tuple[int, int, int]] = []
        if kind in (STRUCT, UNION):
            for i in range(vlen):
                m_name, m_type, m_off = struct.unpack_from("<III", data, pos + 12 * i)
                members.append((m_name, m_type, (m_off & 0xFFFFFF) if kflag else m_off))
        pos += _FIXED.get(kind, 0) + _PER_ITEM.get(kind, 0) * vlen
        types.append((name_off, kind, size_or_type, vlen, members))
    return types, strings


def _name(strings: bytes, off: int) -> str:
    return strings[off: strings.index(b"\0", off)].decode()


def member_offsets(data: bytes, wanted: dict[str, tuple[str, str]]) -> dict[str, int]:
    """Byte offset of each (struct, "member.sub") in `wanted`, looking into anonymous members."""
    types, strings = _parse(data)
    by_name: dict[str, int] = {}
    for tid, (name_off, kind, _s, vlen, _m) in enumerate(types):
        if kind == STRUCT and vlen and name_off:
            by_name.setdefault(_name(strings, name_off), tid)

    def resolve(tid: int) -> int:
        while types[tid][1] in _MODIFIERS:
            tid = types[tid][2]
        return tid

    def find(tid: int, name: str) -> tuple[int, int] | None:  # (bit offset, member type)
        for m_name, m_type, bits in types[tid][4]:
            if m_name and _name(strings, m_name) == name:
                return bits, m_type
            inner = resolve(m_type)
            if not m_name and types[inner][1] in (STRUCT, UNION):
                got = find(inner, name)
                if got is not None:
                    return bits + got[0], got[1]
        return None

    out = {}
    for key, (struct_name, path) in wanted.items():
        if struct_name not in by_name:
            raise BtfError(f"no struct {struct_name} in the kernel's BTF")
        tid, bits = by_name[struct_name], 0
        for part in path.split("."):
            got = find(resolve(tid), part)
            if got is None:
                raise BtfError(f"no member {path} in struct {struct_name}")
            bits += got[0]
            tid = got[1]
        out[key] = bits // 8
    return out


def drop_offsets() -> dict[str, int]:
    """The offsets the drop tracer needs on this kernel (cached per kernel release and BTF size)."""
    size = VMLINUX.stat().st_size
    cache = CACHE_DIR / f"btf-offsets-{os.uname().release}-{size}.json"
    try:
        return json.loads(cache.read_text())
    except (OSError, ValueError):
        pass
    offsets = member_offsets(VMLINUX.read_bytes(), FIELDS)
    try:
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        cache.write_text(json.dumps(offsets))
    except OSError:
        pass
    return offsets
