"""The run's pcapng and one per flow, from the per-interface pcaps and the ledgers (pure apart from files).

Every frame's interface is its capture point (`node1/eth0`, described `node1/eth0 in kp-lab-node1`).
A frame of a followed connection carries the comment `[flow#conn]`; a hop of the ledger carries
`[flow#conn] hop N request at POINT: what changed there`, so one display filter shows one
connection hop by hop across NAT and tunnels. Each hop learns its frame number in both files.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from kpemu.analyse.ledger import ConnLedger, FlowLedger, Hop, PointInfo
from kpemu.capture.pcap import Pkt
from kpemu.capture.pcapng import Frame, read_frames, write_pcapng
from kpemu.report.table import change_summary, hop_numbers
from kpemu.report.wireshark import RUN_PCAPNG, conn_tag, flow_pcapng


@dataclass
class _Tag:
    comment: str
    flow: str
    rank: int  # the hop's position in its connection (ties in time keep the ledger's order)


def _hop_comment(fl: FlowLedger, c: ConnLedger, num: str, h: Hop) -> str:
    changes = "; ".join(change_summary(ch.to_json()) + (f" ({', '.join(ch.by)})" if ch.by else "")
                        for ch in h.changed_by)
    return f"{conn_tag(fl.name, c.index)} hop {num} {h.direction} at {h.point}" + (f": {changes}" if changes else "")


def _tags(ledgers: list[FlowLedger], packets: list[Pkt]) -> dict[tuple[str, int], _Tag]:
    """(point, record index) -> comment, for hop frames and for every other frame of a followed connection."""
    tags: dict[tuple[str, int], _Tag] = {}
    by_tuple: dict[tuple, tuple[str, int]] = {}
    for fl in ledgers:
        for c in fl.connections:
            for rank, (num, h) in enumerate(zip(hop_numbers(c.hops), c.hops, strict=True)):
                tags[(h.pkt.point, h.pkt.index)] = _Tag(_hop_comment(fl, c, num, h), fl.name, rank)
                p = h.pkt
                for t in ((p.point, p.proto, *p.tuple4), (p.point, p.proto, p.dst, p.dport, p.src, p.sport)):
                    by_tuple.setdefault(t, (fl.name, c.index))
    for p in packets:
        owner = by_tuple.get((p.point, p.proto, *p.tuple4))
        if owner and (p.point, p.index) not in tags:
            tags[(p.point, p.index)] = _Tag(conn_tag(*owner), owner[0], 1 << 30)
    return tags


def write_run_pcapngs(out: Path, infos: Mapping[str, PointInfo], files: Mapping[str, Path],
                      ledgers: list[FlowLedger], packets: list[Pkt]) -> list[Path]:
    """Write out/run.pcapng and out/pcaps/flow-<name>.pcapng; set every hop's `frame` and `flow_frame`.

    `files` maps each capture point to its classic pcap; `packets` are those pcaps decoded.
    """
    tags = _tags(ledgers, packets)
    order = {point: i for i, point in enumerate(files)}
    entries: list[tuple[tuple, tuple[str, int], Frame]] = []
    for point, path in files.items():
        info = infos[point]
        for index, f in read_frames(path, point, info.description):
            tag = tags.get((point, index))
            if tag:
                f = Frame(f.data, f.linktype, f.ts_ns, f.point, f.description, tag.comment, f.snaplen)
            entries.append(((f.ts_ns, tag.rank if tag else 1 << 31, order[point], index), (point, index), f))
    entries.sort(key=lambda e: e[0])
    run_frame = {key: n for n, (_, key, _) in enumerate(entries, start=1)}
    written = [out / RUN_PCAPNG]
    write_pcapng(written[0], (f for _, _, f in entries))
    flow_frame: dict[tuple[str, int], int] = {}
    for fl in ledgers:
        mine = [(key, f) for _, key, f in entries if (t := tags.get(key)) is not None and t.flow == fl.name]
        flow_frame |= {key: n for n, (key, _) in enumerate(mine, start=1)}
        written.append(out / flow_pcapng(fl.name))
        write_pcapng(written[-1], (f for _, f in mine))
    for fl in ledgers:
        for c in fl.connections:
            for h in c.hops:
                h.frame = run_frame.get((h.pkt.point, h.pkt.index))
                h.flow_frame = flow_frame.get((h.pkt.point, h.pkt.index))
    return written
