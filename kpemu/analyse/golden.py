"""Golden captures (pure): tcpdump text normalised so that it is the same on every run.

Replaced: timestamps, ephemeral ports (any port not in the scenario's fixed set), sequence and
acknowledgement numbers, window sizes, TCP option values (TS val/ecr), checksums and IP IDs.
Kept: addresses, fixed ports (service, target, node and tunnel ports), flags, lengths.
Only lines that differ in kind are kept: pure ACKs are dropped (whether an ACK travels alone or
rides on data is timing), the rest is de-duplicated and sorted, so N connections to random
backends give the same text as long as each kind of line was seen.
"""

from __future__ import annotations

import difflib
import re

_TS = re.compile(r"^\d{2}:\d{2}:\d{2}\.\d+ ")
_ADDR_PORT = re.compile(r"\b(\d{1,3}\.\d{1,3}\.\d{1,3}\.\d{1,3})\.(\d{1,5})\b")
_SUBS = [
    (re.compile(r"\bseq \d+(:\d+)?"), "seq <seq>"),
    (re.compile(r"\back \d+"), "ack <ack>"),
    (re.compile(r"\bwin \d+"), "win <win>"),
    (re.compile(r"\bTS val \d+ ecr \d+"), "TS val <ts> ecr <ts>"),
    (re.compile(r"\bcksum 0x[0-9a-f]+( \((in)?correct[^)]*\))?"), "cksum <cksum>"),
    (re.compile(r"\bid \d+"), "id <id>"),
]
_PURE_ACK = re.compile(r"Flags \[\.\],")


def normalise_line(line: str, fixed_ports: set[int]) -> str:
    """One tcpdump -nn line with the run-dependent parts replaced."""
    line = _TS.sub("", line.rstrip())

    def port(m: re.Match[str]) -> str:
        p = int(m.group(2))
        return f"{m.group(1)}.{p}" if p in fixed_ports else f"{m.group(1)}.<port>"

    line = _ADDR_PORT.sub(port, line)
    for rx, rep in _SUBS:
        line = rx.sub(rep, line)
    return line


def join_continuations(text: str) -> list[str]:
    """One entry per packet: tcpdump prints a tunnelled packet's inner header on its own line
    (VXLAN on 8472 as `OTV, ...` then the inner packet); those lines are joined with " | "."""
    out: list[str] = []
    for raw in text.splitlines():
        if not raw.strip():
            continue
        if out and not _TS.match(raw):
            out[-1] += " | " + raw.strip()
        else:
            out.append(raw)
    return out


def normalise_capture(text: str, fixed_ports: set[int]) -> list[str]:
    """A whole capture's text -> its sorted, de-duplicated normalised packets (pure ACKs dropped)."""
    lines = {normalise_line(raw, fixed_ports) for raw in join_continuations(text)}
    return sorted(line for line in lines if not _PURE_ACK.search(line))


def golden_diff(golden_file: str, expected: list[str], seen: list[str]) -> str:
    """A unified diff of the golden file's lines (expected) and this run's normalised capture (seen); ""
    when equal."""
    if expected == seen:
        return ""
    return "\n".join(difflib.unified_diff(expected, seen, golden_file, "this run", lineterm="", n=1))
