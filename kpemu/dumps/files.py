"""The dump files `kpemu check-node` and `kpemu trace` are given, and how one is read (`-` is standard input)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from kpemu.errors import InputError, Problem


@dataclass(frozen=True)
class DumpFiles:
    """The node's dumps given on the command line (None: not given)."""

    iptables_save: str | None = None  # iptables-save (-c), iptables -S, or a fragment
    ipvs: str | None = None  # ipvsadm -Sn or -Ln
    ipset: str | None = None  # ipset save or list
    nft: str | None = None  # nft list ruleset, or nft -j list ruleset
    table: str | None = None  # --table: the table of an `iptables -S` output or a fragment

    options: ClassVar[tuple[str, ...]] = ("table",)  # the fields that tell how a file is read, not files


def read_text(path: str) -> str:
    """A dump file's text (`-` is standard input); InputError when it cannot be read or is not UTF-8
    (naming the line and column of the first byte that is not)."""
    try:
        data = Path("/dev/stdin" if path == "-" else path).read_bytes()
    except OSError as e:
        raise InputError([Problem(path, "", f"cannot read the dump: {e.strerror}")]) from None
    try:
        return data.decode()
    except UnicodeDecodeError as e:
        line = data.count(b"\n", 0, e.start) + 1
        col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
        msg = (f"column {col}: byte {data[e.start]:#04x} is not UTF-8; the tools print text: save their output "
               "again, unedited")
        raise InputError([Problem(path, f"line {line}", msg)]) from None
