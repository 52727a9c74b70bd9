"""report.html (pure): one self-contained page, no network, no JavaScript: the topology as inline
SVG, per flow the hop table, the sequence diagram drawn as inline SVG (with its Mermaid source
in a <pre> for copy-paste), and per hop the rules and capture lines one click away (<details>).

Input is hops.json's dict (DESIGN.md section 5), the topology, and optionally per-hop extras:
`details[flow][hop index] = {"rules": [...], "capture": [...]}`.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

from kpemu.model.topology import Topology
from kpemu.report.graph import topology_svg
from kpemu.report.mermaid import change_text, hop_point, sequence_diagram, tuple_text
from kpemu.report.table import DIED, verdict_lines

_CSS = """body{font-family:sans-serif;margin:20px;max-width:1240px}table{border-collapse:collapse;font-size:13px}
td,th{border:1px solid #bbb;padding:3px 6px;vertical-align:top}th{background:#eee}pre{background:#f6f6f6;
padding:8px;overflow-x:auto;font-size:12px}.ok{color:#060}.fail{color:#a00}details{margin:2px 0}
svg text{font-family:monospace}"""
_COL, _ROW, _TOP = 170, 46, 60


def sequence_svg(flow: Mapping) -> str:
    """The flow's sequence diagram as SVG: a lifeline per hop, an arrow per packet sighting, notes."""
    e = html.escape
    hops = list(flow.get("hops") or [])
    parts: list[str] = []
    for h in hops:
        if hop_point(h) not in parts:
            parts.append(hop_point(h))
    rows = sum(1 + len(h.get("changed_by") or []) for h in hops) or 1
    width = max(len(parts) * _COL + 40, 1000)  # room for the notes
    height = _TOP + rows * _ROW + 30
    x = {p: 20 + i * _COL + _COL // 2 for i, p in enumerate(parts)}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="sequence" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-size="11">',
           '<defs><marker id="arr" markerWidth="8" markerHeight="8" refX="7" refY="3" orient="auto">'
           '<path d="M0,0 L7,3 L0,6 z" fill="#333"/></marker></defs>']
    for p in parts:
        out.append(f'<rect x="{x[p] - _COL // 2 + 6}" y="10" width="{_COL - 12}" height="28" fill="#e8eef7" '
                   f'stroke="#5577aa"/><text x="{x[p]}" y="28" text-anchor="middle">{e(p)}</text>')
        out.append(f'<line x1="{x[p]}" y1="38" x2="{x[p]}" y2="{height - 10}" stroke="#99a" stroke-dasharray="4,3"/>')
    y = _TOP
    prev = None
    verdict = flow.get("verdict") or {}
    dying = max((i for i, h in enumerate(hops) if h.get("direction") == verdict.get("direction", "request")),
                default=None) if verdict else None
    for i, h in enumerate(hops):
        cur = x[hop_point(h)]
        src = x[hop_point(prev)] if prev is not None and prev.get("direction") == h.get("direction") else cur - 40
        color = "#333" if h.get("direction") != "reply" else "#2a6"
        dash = "" if h.get("direction") != "reply" else ' stroke-dasharray="6,3"'
        if src == cur:
            src = cur - 40
        out.append(f'<line class="msg" x1="{src}" y1="{y}" x2="{cur}" y2="{y}" stroke="{color}"{dash} '
                   f'marker-end="url(#arr)"/>')
        out.append(f'<text x="{min(src, cur) + 4}" y="{y - 5}" fill="{color}">{e(tuple_text(h))}</text>')
        if i == dying:  # the packet died here
            out.append(f'<text class="died" x="{cur + 4}" y="{y + 5}" fill="#c00" font-size="16">{DIED}</text>')
        y += _ROW
        for ch in h.get("changed_by") or []:
            text = change_text(ch)
            fits = int((width - 32) / 6.6)
            shown = text if len(text) <= fits else text[: fits - 1] + "…"  # the full text is the tooltip
            w = len(shown) * 6.6 + 12
            left = max(min(cur - 20, width - w - 10), 10)
            out.append(f'<g><title>{e(text)}</title><rect class="note" x="{left}" y="{y - 30}" width="{w}" '
                       f'height="22" fill="#fff8c4" stroke="#c9b400"/><text x="{left + 6}" y="{y - 15}">'
                       f"{e(shown)}</text></g>")
            y += _ROW
        prev = h
    out.append("</svg>")
    return "\n".join(out)


def _hop_table(flow: Mapping, details: Mapping[int, Mapping] | None) -> str:
    e = html.escape
    rows = ["<table class=\"hops\"><tr><th>#</th><th>dir</th><th>where</th><th>src</th><th>dst</th><th>flags</th>"
            "<th>what changed</th><th>by</th><th>details</th></tr>"]
    for i, h in enumerate(flow.get("hops") or []):
        src = f"{h.get('src')}:{h.get('sport')}" if h.get("sport") is not None else str(h.get("src"))
        dst = f"{h.get('dst')}:{h.get('dport')}" if h.get("dport") is not None else str(h.get("dst"))
        chs = h.get("changed_by") or []
        what = "<br>".join(e(change_text({**c, "by": []})) for c in chs)
        by = "<br>".join(e(b) for c in chs for b in (c.get("by") or []))
        d = (details or {}).get(i) or {}
        extra = []
        for key in ("rules", "capture"):
            if d.get(key):
                extra.append(f"<details><summary>{key} ({len(d[key])})</summary><pre>"
                             f"{e(chr(10).join(d[key]))}</pre></details>")
        if h.get("outer"):
            extra.append(f"<details><summary>outer</summary><pre>{e(str(h['outer']))}</pre></details>")
        rows.append(f"<tr><td>{i + 1}</td><td>{e(str(h.get('direction')))}</td><td>{e(hop_point(h))}</td>"
                    f"<td>{e(src)}</td><td>{e(dst)}</td><td>{e(str(h.get('flags') or ''))}</td><td>{what}</td>"
                    f"<td>{by}</td><td>{''.join(extra)}</td></tr>")
    rows.append("</table>")
    return "\n".join(rows)


def render_html(hops: Mapping, topo: Topology | None = None,
                details: Mapping[str, Mapping[int, Mapping]] | None = None,
                extra_sections: Mapping[str, str] | None = None) -> str:
    """The whole report page (a string; nothing is fetched when it is opened)."""
    e = html.escape
    ok = hops.get("ok")
    head = (f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>kpemu {e(str(hops.get('scenario', '')))}</title><style>{_CSS}</style></head><body>")
    out = [head, f"<h1>{e(str(hops.get('scenario', 'kpemu run')))} "
                 f"<span class=\"{'ok' if ok else 'fail'}\">{'PASS' if ok else 'FAIL'}</span></h1>",
           f"<p>runtime {e(str(hops.get('runtime', '')))}, kernel {e(str(hops.get('kernel', '')))}</p>"]
    if topo is not None:
        out += ["<h2>Topology</h2>", topology_svg(topo)]
    for flow in hops.get("flows") or []:
        name = str(flow.get("name"))
        died = flow.get("verdict")
        mark = (f"<span class=\"fail\">{DIED} died on {e(str(died.get('at')))}</span>" if died else
                f"<span class=\"{'ok' if flow.get('ok') else 'fail'}\">{'ok' if flow.get('ok') else 'failed'}</span>")
        out.append(f"<h2 id=\"flow-{e(name)}\">Flow {e(name)}: {e(str(flow.get('from')))} -&gt; "
                   f"{e(str(flow.get('to')))} {mark}</h2>")
        if flow.get("backends"):
            out.append(f"<p>backends that answered: {e(', '.join(flow['backends']))}</p>")
        out.append(_hop_table(flow, (details or {}).get(name)))
        if died:
            out.append("".join(f'<p class="fail">{e(line)}</p>' for line in verdict_lines(died)))
        out.append("<h3>Sequence</h3>")
        out.append(sequence_svg(flow))
        out.append(f"<details><summary>Mermaid source</summary><pre class=\"mermaid-source\">"
                   f"{e(sequence_diagram(flow))}</pre></details>")
        for key in ("conntrack", "ipvs"):
            if flow.get(key):
                lines = [str(c.get("line", c)) for c in flow[key]]
                out.append(f"<details><summary>{key}</summary><pre>{e(chr(10).join(lines))}</pre></details>")
    for title, body in (extra_sections or {}).items():
        out.append(f"<h2>{e(title)}</h2><pre>{e(body)}</pre>")
    checks = hops.get("checks") or []
    if checks:
        out.append("<h2>Expectations</h2><table><tr><th>flow</th><th>check</th><th></th><th>expected</th>"
                   "<th>seen</th></tr>")
        for c in checks:
            cls, verdict = ("ok", "PASS") if c.get("ok") else ("fail", "FAIL")
            seen = str(c.get("seen", "")) + (f"\n{c['diff']}" if c.get("diff") else "")
            out.append(f"<tr><td>{e(str(c.get('flow', '')))}</td><td>{e(str(c.get('what', '')))}</td>"
                       f'<td class="{cls}">{verdict}</td><td>{e(str(c.get("expected", "")))}</td>'
                       f"<td><pre>{e(seen)}</pre></td></tr>")
        out.append("</table>")
    out.append("</body></html>\n")
    return "\n".join(out)
