"""Two ledgers of the same flow side by side (pure rows, rich rendering): kube-proxy in iptables mode
vs IPVS mode, from the two runs' hops.json, rows marked where the tuple, what changed, or what did
it differ. Client ports chosen by the kernel are shown as `*` so they do not count as a difference.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kpemu.report.mermaid import change_text, hop_point
from kpemu.report.runreport import FlowReport, RunReport


@dataclass(frozen=True)
class Cell:
    """One mode's view of a hop: tuple (ephemeral ports as *), what changed, by what."""

    tuple: str
    changed: str
    by: str


@dataclass(frozen=True)
class CompareRow:
    """One aligned row: direction, capture point, each side's cell (None: not seen), what differs."""

    direction: str
    point: str
    a: Cell | None
    b: Cell | None
    differs: tuple[str, ...]  # "seen", "tuple", "changed", "by"


def _ep(ip: object, port: object, fixed: Collection[int]) -> str:
    if port is None:
        return str(ip)
    return f"{ip}:{port if port in fixed else '*'}"


def cell(hop: Mapping, fixed: Collection[int]) -> Cell:
    """A hop of hops.json as a comparable cell."""
    t = f"{_ep(hop.get('src'), hop.get('sport'), fixed)} > {_ep(hop.get('dst'), hop.get('dport'), fixed)}"
    if hop.get("flags"):
        t += f" [{hop['flags']}]"
    o = hop.get("outer")
    if o:
        t += f" in {o.get('type')} {o.get('src')} > {o.get('dst')}"
    chs = hop.get("changed_by") or []
    changed = "; ".join(change_text({**c, "by": [],
                                     "from": _norm(str(c.get("from", "")), fixed),
                                     "to": _norm(str(c.get("to", "")), fixed)}) for c in chs)
    by = "; ".join(b for c in chs for b in (c.get("by") or []))
    return Cell(t, changed, by)


def _norm(ep: str, fixed: Collection[int]) -> str:
    ip, _, port = ep.rpartition(":")
    if ip and port.isdigit() and int(port) not in fixed:
        return f"{ip}:*"
    return ep


def pick_connection(flow: FlowReport, backend: str | None) -> list[dict]:
    """The hops of the connection answered by `backend` (else the flow's representative hops)."""
    if backend:
        for c in flow.get("connections") or []:
            if c.get("backend") == backend and c.get("hops"):
                return list(c["hops"])
    return list(flow.get("hops") or [])


def compare_flow(a: FlowReport, b: FlowReport, fixed: Collection[int]) -> list[CompareRow]:
    """Align two ledgers of one flow by capture point (per direction) and mark the differences.

    The B side shows the connection answered by the same backend as A's representative one,
    when there is such a connection, so that the rows describe the same path.
    """
    backend = next((c.get("backend") for c in a.get("connections") or [] if c.get("hops")), None)
    ha, hb = list(a.get("hops") or []), pick_connection(b, backend)
    rows: list[CompareRow] = []
    for direction in ("request", "reply"):
        sa = [h for h in ha if h.get("direction") == direction]
        sb = [h for h in hb if h.get("direction") == direction]
        pa, pb = [hop_point(h) for h in sa], [hop_point(h) for h in sb]
        for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, pa, pb, autojunk=False).get_opcodes():
            if op == "equal":
                pairs = list(zip(range(i1, i2), range(j1, j2), strict=True))
            else:
                n = max(i2 - i1, j2 - j1)
                pairs = [(i1 + k if i1 + k < i2 else None, j1 + k if j1 + k < j2 else None) for k in range(n)]
            for i, j in pairs:
                ca = cell(sa[i], fixed) if i is not None else None
                cb = cell(sb[j], fixed) if j is not None else None
                point = pa[i] if i is not None else pb[j]  # type: ignore[index]
                if ca is not None and cb is not None and pa[i] != pb[j]:  # type: ignore[index]
                    rows.append(CompareRow(direction, pa[i], ca, None, ("seen",)))  # type: ignore[index]
                    rows.append(CompareRow(direction, pb[j], None, cb, ("seen",)))  # type: ignore[index]
                    continue
                if ca is None or cb is None:
                    diff: tuple[str, ...] = ("seen",)
                else:
                    diff = tuple(k for k in ("tuple", "changed", "by") if getattr(ca, k) != getattr(cb, k))
                rows.append(CompareRow(direction, point, ca, cb, diff))
    return rows


def print_comparison(console: Console, scenario: str, modes: tuple[str, str], a: RunReport | None,
                     b: RunReport | None, fixed: Collection[int], notes: Mapping[str, str] | None = None) -> int:
    """Print every flow's two ledgers side by side; returns the number of rows that differ."""
    notes = notes or {}
    for mode, data in zip(modes, (a, b), strict=True):
        if data is None:
            console.print(f"[yellow]{scenario}: no {mode} ledger[/yellow]: ", end="", highlight=False)
            console.print(notes.get(mode, "that half did not run"), markup=False, highlight=False)
    if a is None or b is None:
        return 0
    flows_b = {f.get("name"): f for f in b.get("flows") or []}
    differing = 0
    for fa in a.get("flows") or []:
        fb = flows_b.get(fa.get("name"))
        if fb is None:
            continue
        rows = compare_flow(fa, fb, fixed)
        t = Table(title=escape(f"{scenario} / {fa.get('name')}: {modes[0]} vs {modes[1]} "
                               f"(backends {', '.join(fa.get('backends') or []) or '-'} | "
                               f"{', '.join(fb.get('backends') or []) or '-'})"),
                  title_justify="left", show_lines=True)
        for col in ("", "dir", "where", f"{modes[0]}: tuple", f"{modes[0]}: changed, by",
                    f"{modes[1]}: tuple", f"{modes[1]}: changed, by", "differs"):
            t.add_column(col, overflow="fold")
        for r in rows:
            mark = "≠" if r.differs else ""
            differing += bool(r.differs)

            def side(c: Cell | None) -> tuple[str, str]:
                if c is None:
                    return ("(not seen)", "")
                return (c.tuple, c.changed + (f"\nby {c.by}" if c.by else ""))

            cells = (mark, r.direction, r.point, *side(r.a), *side(r.b), ", ".join(r.differs))
            t.add_row(*(escape(str(c)) for c in cells), style="yellow" if r.differs else None)
        console.print(t)
        for mode, f in ((modes[0], fa), (modes[1], fb)):
            o = (f.get("oracle") or {}).get("text")
            if o:
                console.print(f"  {mode} oracle: {o}", markup=False, highlight=False)
            s = f.get("hook_claim")
            if s:
                console.print(f"  {mode} hook claim: {s['text']}", markup=False, highlight=False)
    return differing
