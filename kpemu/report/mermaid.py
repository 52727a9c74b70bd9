"""Mermaid sequence diagrams of a flow (pure): participants are the hops, messages the packet
with its tuple, notes what changed it (and the rule or IPVS decision that did).

Works on a flow of hops.json (kpemu.report.runreport.RunReport), so it renders saved runs too.
"""

from __future__ import annotations

import re
from collections.abc import Mapping


def participant_id(point: str) -> str:
    """A Mermaid-safe identifier for a capture point ("web-0/eth0" -> "web_0_eth0")."""
    return re.sub(r"[^A-Za-z0-9_]", "_", point)


def hop_point(hop: Mapping) -> str:
    """A hop's capture point: member/interface."""
    return f"{hop.get('member') or hop.get('node')}/{hop.get('interface')}"


def tuple_text(hop: Mapping) -> str:
    """"10.242.72.50:34410 > 192.168.1.100:30080 [S]" (+ outer header when tunnelled)."""
    def ep(ip: object, port: object) -> str:
        return f"{ip}:{port}" if port is not None else str(ip)

    out = f"{ep(hop.get('src'), hop.get('sport'))} > {ep(hop.get('dst'), hop.get('dport'))}"
    if hop.get("flags"):
        out += f" [{hop['flags']}]"
    o = hop.get("outer")
    if o:
        vni = f" vni {o.get('vni')}" if o.get("vni") is not None else ""
        out += f" in {o.get('type')}{vni} {o.get('src')} > {o.get('dst')}"
    return out


def change_text(ch: Mapping) -> str:
    """"DNAT dst 10.96.0.10:80 -> 10.244.1.5:80: DNAT by KUBE-SEP-... (default/web:http)"."""
    if ch.get("field") == "outer":
        base = f"{ch.get('kind')}"
    else:
        base = f"{ch.get('kind')} {ch.get('field')} {ch.get('from')} -> {ch.get('to')}"
    by = [b for b in ch.get("by") or [] if b]
    return base + (": " + "; ".join(by) if by else "")


def _esc(text: str) -> str:
    # Mermaid ends a message at a newline and treats ';' and '#' specially
    return text.replace(";", ",").replace("#", "").replace("\n", " ")


def dying_index(flow: Mapping) -> int | None:
    """The hop the packet died at: the last sighting, in the verdict's direction, at the capture point
    the verdict names (verdict.point), else the last sighting in that direction; None without a verdict."""
    verdict = flow.get("verdict") or {}
    if not verdict:
        return None
    hops = list(flow.get("hops") or [])
    going = [i for i, h in enumerate(hops) if h.get("direction") == verdict.get("direction", "request")]
    return next((i for i in reversed(going) if hop_point(hops[i]) == verdict.get("point")),
                going[-1] if going else None)


def sequence_diagram(flow: dict) -> str:
    """The Mermaid `sequenceDiagram` source of one flow of hops.json."""
    hops = flow.get("hops") or []
    lines = ["sequenceDiagram", f"    title {_esc(flow.get('name', 'flow'))}: {_esc(str(flow.get('from')))}"
                                 f" -> {_esc(str(flow.get('to')))}"]
    seen: list[str] = []
    for h in hops:
        p = hop_point(h)
        if p not in seen:
            seen.append(p)
            lines.append(f"    participant {participant_id(p)} as {p}")
    verdict = flow.get("verdict") or {}
    dying = dying_index(flow)
    prev = None
    for i, h in enumerate(hops):
        cur = participant_id(hop_point(h))
        if prev is not None and prev.get("direction") != h.get("direction"):
            lines.append(f"    Note over {cur}: reply")
        frm = participant_id(hop_point(prev)) if prev is not None and prev.get("direction") == h.get("direction") \
            else cur
        arrow = "->>" if h.get("direction") != "reply" else "-->>"
        if i == dying:
            arrow = arrow[:-2] + "x"  # the packet dies here: the arrow ends in a cross
        lines.append(f"    {frm}{arrow}{cur}: {_esc(tuple_text(h))}")
        for ch in h.get("changed_by") or []:
            lines.append(f"    Note over {cur}: {_esc(change_text(ch))}")
        if i == dying:
            lines.append(f"    Note over {cur}: died: {_esc(str(verdict.get('text')))}")
        prev = h
    return "\n".join(lines) + "\n"
