"""A flow's sequence diagram as SVG (pure): a lifeline per capture point, an arrow per sighting, notes.

Sized to its lanes and never wider than `MAX_WIDTH` (the report's 1,240 px page less its margins): lanes
narrow when there are many (their names wrap, member over interface), message labels and notes wrap
and stay inside the drawing; nothing is truncated. The red cross is on the lane of the capture point
the verdict names (kpemu.report.mermaid.dying_index).
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Mapping

from kpemu.report.mermaid import change_text, dying_index, hop_point, tuple_text
from kpemu.report.table import DIED

MAX_WIDTH = 1200
CHAR = 6.8  # px per character of 11px monospace, with some slack
_ROW, _TOP, _LINE, _NOTE_CHARS = 40, 20, 14, 96
_MIN_COL, _COL = 90, 170

_e = html.escape


def _wrap(text: str, chars: int) -> list[str]:
    return textwrap.wrap(text, max(chars, 6), break_long_words=True, break_on_hyphens=False) or [""]


def _lane_name(point: str, chars: int) -> list[str]:
    """A lane's name in lines of at most `chars`: member, then interface."""
    member, _, iface = point.partition("/")
    return [s for part in (member + "/", iface) if part for s in _wrap(part, chars)]


def _label(hop: Mapping, chars: int) -> list[str]:
    """A sighting's arrow label (its tuple and frame), wrapped to `chars`."""
    return _wrap(tuple_text(hop) + (f"  (frame {hop['frame']})" if hop.get("frame") else ""), chars)


def sequence_svg(flow: Mapping) -> str:
    """The flow's sequence diagram as SVG, at most MAX_WIDTH wide."""
    hops = list(flow.get("hops") or [])
    parts = list(dict.fromkeys(hop_point(h) for h in hops))
    natural = max([_COL, *(int(len(p) * CHAR) + 28 for p in parts)])
    col = max(_MIN_COL, min(natural, (MAX_WIDTH - 40) // max(len(parts), 1)))
    lanes_right = 20 + len(parts) * col
    width = max(min(MAX_WIDTH, max(lanes_right + 20, 400)), lanes_right + 20)
    chars = int((width - 30) / CHAR)  # the longest line anything may have
    x = {p: 20 + i * col + col // 2 for i, p in enumerate(parts)}
    names = {p: _lane_name(p, int((col - 14) / CHAR)) for p in parts}
    head_h = 12 + _LINE * max((len(v) for v in names.values()), default=1)
    verdict = flow.get("verdict") or {}
    dying = dying_index(flow)
    body: list[str] = []
    y, prev = _TOP + head_h + 22 + (_LINE * (len(_label(hops[0], chars)) - 1) if hops else 0), None
    for i, h in enumerate(hops):
        cur = x[hop_point(h)]
        src = x[hop_point(prev)] if prev is not None and prev.get("direction") == h.get("direction") else cur - 40
        src = cur - 40 if src == cur else src
        reply = h.get("direction") == "reply"
        color, dash = ("#2a6", ' stroke-dasharray="6,3"') if reply else ("#333", "")
        label = _label(h, chars)
        for k, line in enumerate(label):
            lx = min(max(min(src, cur) + 4, 10), width - 10 - len(line) * CHAR)
            body.append(f'<text x="{lx:.0f}" y="{y - 5 - _LINE * (len(label) - 1 - k)}" fill="{color}">'
                        f'{_e(line)}</text>')
        body.append(f'<line class="msg" x1="{src}" y1="{y}" x2="{cur}" y2="{y}" stroke="{color}"{dash} '
                    f'marker-end="url(#arr)"/>')
        if i == dying:  # the packet died here, on the lane the verdict names
            body.append(f'<text class="died" data-point="{_e(str(verdict.get("point") or hop_point(h)))}" '
                        f'x="{cur - 5}" y="{y + 6}" fill="#c00" font-size="16">{DIED}</text>')
        y += _ROW // 2
        for ch in h.get("changed_by") or []:
            lines = _wrap(change_text(ch), min(_NOTE_CHARS, chars - 2))
            w = int(max(len(s) for s in lines) * CHAR) + 12
            left = max(min(cur - 20, width - 10 - w), 10)  # under its lane, inside the drawing
            height = 8 + _LINE * len(lines)
            tspans = "".join(f'<tspan x="{left + 6}" dy="{_LINE if k else 0}">{_e(s)}</tspan>'
                             for k, s in enumerate(lines))
            body.append(f'<g><rect class="note" x="{left}" y="{y - 4}" width="{w}" height="{height}" fill="#fff8c4" '
                        f'stroke="#c9b400"/><text x="{left + 6}" y="{y + 10}">{tspans}</text></g>')
            y += height + 8
        nxt = hops[i + 1] if i + 1 < len(hops) else None
        y += _ROW // 2 + (_LINE * (len(_label(nxt, chars)) - 1) if nxt else 0)
        prev = h
    height = y + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="sequence" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-size="11">',
           '<defs><marker id="arr" markerWidth="8" markerHeight="8" refX="7" refY="3" orient="auto">'
           '<path d="M0,0 L7,3 L0,6 z" fill="#333"/></marker></defs>']
    for p in parts:
        tspans = "".join(f'<tspan x="{x[p]}" dy="{_LINE if k else 0}">{_e(s)}</tspan>' for k, s in enumerate(names[p]))
        out.append(f'<rect class="lane" data-point="{_e(p)}" x="{x[p] - col // 2 + 4}" y="{_TOP - 10}" '
                   f'width="{col - 8}" height="{head_h}" fill="#e8eef7" stroke="#5577aa"/>'
                   f'<text x="{x[p]}" y="{_TOP + 6}" text-anchor="middle">{tspans}</text>')
        out.append(f'<line x1="{x[p]}" y1="{_TOP - 10 + head_h}" x2="{x[p]}" y2="{height - 10}" stroke="#99a" '
                   f'stroke-dasharray="4,3"/>')
    return "\n".join([*out, *body, "</svg>"])
