"""The hop table rows shared by every renderer (pure): hop, where, src, dst, what changed, by."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from kpemu.analyse.ledger import Hop
from kpemu.report.mermaid import hop_point
from kpemu.report.runreport import ChangeReport, HopReport

HEADERS = ("hop", "where", "src", "dst", "what changed", "by")


def hop_numbers(hops: Iterable[Hop | Mapping]) -> list[str]:
    """Request hops numbered 1.., reply hops r1.. (as in the reports' hop tables)."""
    n = {"request": 0, "reply": 0}
    out = []
    for h in hops:
        d = h.direction if isinstance(h, Hop) else str(h.get("direction"))
        n[d] = n.get(d, 0) + 1
        out.append(f"{n[d]}" if d != "reply" else f"r{n[d]}")
    return out


def endpoint(ip: str, port: int | None) -> str:
    """`ip:port`, or the address alone for a packet without ports."""
    return f"{ip}:{port}" if port is not None else ip


def change_summary(c: ChangeReport) -> str:
    """What one change did, without who did it: "DNAT dst A -> B", or "encap vxlan ..." for the outer header."""
    return f"{c['kind']} {c['field']} {c['from']} -> {c['to']}" if c["field"] != "outer" else (
        f"{c['kind']} {c['to'] or c['from']}")


def hop_rows(hops: Sequence[HopReport]) -> list[tuple[str, str, str, str, str, str]]:
    """One row per hop of hops.json; request hops numbered 1.., reply hops r1.."""
    rows = []
    for num, h in zip(hop_numbers(hops), hops, strict=True):
        flags = f" [{h['flags']}]" if h["flags"] else f" ({h['proto']})"
        src, dst = endpoint(h["src"], h["sport"]), endpoint(h["dst"], h["dport"]) + flags
        o = h["outer"]
        if o:
            vni = f" vni {o['vni']}" if o["vni"] is not None else ""
            dst += f" in {o['type']}{vni} {o['src']} > {o['dst']}"
        changes = h["changed_by"]
        what = "; ".join(change_summary(c) for c in changes)
        by = ", ".join(sorted({(c["node"] or "?") + (f": {', '.join(c['by'])}" if c["by"] else "") for c in changes}))
        rows.append((num, hop_point(h), src, dst, what, by))
    return rows


DIED = "✗"


def verdict_row(v: dict) -> tuple[str, str, str, str, str, str]:
    """The hop table's last row for a connection that died: where, and what killed it."""
    where = f"{v.get('at') or '?'}" + (f" ({v['netns']})" if v.get("netns") else "")
    what = f"died: {v.get('action')}" + (f" ({v['reason']})" if v.get("reason") else "")
    return (DIED, where, "", "", what, str(v.get("text") or ""))


def verdict_lines(v: dict) -> list[str]:
    """The verdict in words: what killed the packet and what that means."""
    out = [f"Died on {v.get('at')} ({v.get('direction')}, from {v.get('evidence')}): {v.get('text')}"]
    if v.get("why"):
        out.append(f"Why: {v['why']}")
    return out


def opened_line(conn: Mapping) -> str | None:
    """For a connection whose table follows a later packet that died (hops.json `opened`): where its
    answered first packet got, in words; None for the others."""
    opened = conn.get("opened") or []
    if not opened:
        return None
    req = [h for h in opened if h.get("direction") == "request"]
    rep = [h for h in opened if h.get("direction") == "reply"]
    went = f"reached {hop_point(req[-1])}" if req else "was seen"
    back = f" and its answer came back to {hop_point(rep[-1])}" if rep else ""
    return (f"Its first packet {went}{back}; the hops above are the later packet the kernel reported dropped "
            "(opened in hops.json holds the first one's).")
