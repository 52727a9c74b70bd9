"""pcapng files with named capture points (pure apart from reading and writing the files).

scapy's pcapng writer names interfaces (if_name) and comments packets (opt_comment); this adds
what it lacks: an interface description (if_description), nanosecond timestamps (if_tsresol, so
the per-interface pcaps' nanosecond stamps survive) and no unnamed interface 0.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from scapy.utils import RawPcapNgWriter, RawPcapReader

_IF_NAME, _IF_DESCRIPTION, _IF_TSRESOL = 2, 3, 9


@dataclass(frozen=True)
class Frame:
    """One captured frame, ready to write: its bytes, link type, time and capture point."""

    data: bytes
    linktype: int
    ts_ns: int
    point: str  # the interface name in the pcapng ("node1/eth0")
    description: str  # the interface description ("node1/eth0 in kp-lab-node1")
    comment: str = ""
    snaplen: int = 262144  # what its capture kept of each frame (the classic pcap's header says)


def read_frames(path: Path, point: str, description: str) -> Iterator[tuple[int, Frame]]:
    """(record index, Frame) for every record of a classic pcap; nothing for an empty or missing file."""
    try:
        reader = RawPcapReader(str(path))
    except (OSError, EOFError):
        return
    with reader:
        nano = getattr(reader, "nano", False)
        for index, (data, meta) in enumerate(reader):
            ts_ns = meta.sec * 1_000_000_000 + (meta.usec if nano else meta.usec * 1000)
            yield index, Frame(bytes(data), reader.linktype, ts_ns, point, description,
                               snaplen=getattr(reader, "snaplen", 262144))


class _NamedWriter(RawPcapNgWriter):
    """scapy's writer with described, nanosecond interfaces, numbered from 0 in order of appearance."""

    def __init__(self, path: Path, descriptions: dict[bytes, bytes], snaplens: dict[bytes, int]) -> None:
        super().__init__(str(path))
        self.tsresol = 1_000_000_000
        self.descriptions = descriptions
        self.snaplens = snaplens
        self.interfaces2id = {None: -1}  # the first named interface gets id 0
        self.header_present = True
        self._write_block_shb()

    def _option(self, code: int, value: bytes) -> bytes:
        return struct.pack(self.endian + "HH", code, len(value)) + self._add_padding(value)

    def _write_block_idb(self, linktype: int, ifname: bytes | None = None) -> None:  # type: ignore[override]
        opts = b""
        if ifname is not None:
            opts += self._option(_IF_NAME, ifname)
            if ifname in self.descriptions:
                opts += self._option(_IF_DESCRIPTION, self.descriptions[ifname])
        opts += self._option(_IF_TSRESOL, b"\x09") + struct.pack(self.endian + "HH", 0, 0)
        body = struct.pack(self.endian + "HHI", linktype, 0, self.snaplens.get(ifname or b"", 262144))
        self.f.write(self.build_block(struct.pack(self.endian + "I", 1), body, options=opts))


def write_pcapng(path: Path, frames: Iterable[Frame]) -> int:
    """Write `frames` in the order given, one interface per capture point; returns how many."""
    frames = list(frames)
    descriptions = {f.point.encode(): f.description.encode() for f in frames}
    snaplens = {f.point.encode(): f.snaplen for f in frames}
    path.parent.mkdir(parents=True, exist_ok=True)
    with _NamedWriter(path, descriptions, snaplens) as w:
        for f in frames:
            w._write_packet(f.data, f.linktype, sec=Decimal(f.ts_ns) / 1_000_000_000, ifname=f.point.encode(),
                            comments=[f.comment.encode()] if f.comment else None)
    return len(frames)
