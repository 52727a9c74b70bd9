"""The topology picture, and one flow's path drawn on it (pure SVG).

Externals and the underlay on top, nodes below with their pods; with a flow, every capture point the
flow was seen at is a dot (a node's interfaces are chips in its box, a pod's and an external's its box,
the underlay's bridge ports on the bar), the request a solid arrow from sighting to sighting, the reply
a dashed one, each NAT change a label in the box of the member that made it, and a red cross on the
capture point of the verdict (where the packet died). Hops at members the topology does not have are
named under the picture, not guessed onto it.

Input is a flow of hops.json (kpemu.report.runreport.FlowReport) and the topology.
"""

from __future__ import annotations

import html
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kpemu.cni import cni_of
from kpemu.model.topology import Topology
from kpemu.report.mermaid import change_text, dying_index, hop_point

CHAR_W = 7.3  # 12px monospace: px a character
SMALL_W = 6.1  # 10px monospace
POD_H, LINE_H, CHIP_H, CHIP_GAP = 34, 14, 28, 14
EXT_W = 220
MAX_COL = 440  # a node column widens for its interface chips up to this
REQUEST, REPLY, DEAD = "#1f5fbf", "#1a8f4a", "#d00000"
UNDERLAY = "underlay"

_e = html.escape


@dataclass(frozen=True)
class Box:
    """A member's rectangle on the picture."""

    member: str
    kind: str  # external | underlay | node | pod | chip
    x: float
    y: float
    w: float
    h: float

    @property
    def centre(self) -> tuple[float, float]:
        return self.x + self.w / 2, self.y + self.h / 2


@dataclass(frozen=True)
class Notes:
    """What a flow adds to a member's box: its NAT labels (lines, with their direction) and, for a node,
    the interfaces the flow was seen on."""

    labels: Mapping[str, Sequence[tuple[str, str]]]  # member -> [(line, direction)]
    chips: Mapping[str, Sequence[str]]  # node -> interfaces


def _svc_label(s) -> str:
    ports = ", ".join(f"{p.port}/{p.protocol}" + (f" nodePort {p.nodePort}" if p.nodePort else "") for p in s.ports)
    lb = f" LB {', '.join(s.loadBalancerIPs)}" if s.loadBalancerIPs else ""
    return f"{s.namespace}/{s.name} {s.type} {s.clusterIP} {ports}{lb}"


def _tunnel(topo: Topology, n) -> str:
    return f"{cni_of(topo).tunnel_device} {n.tunnelIP}" if n.tunnelIP else ""


def _wrap(text: str, px: float, char_w: float = CHAR_W) -> list[str]:
    return textwrap.wrap(text, max(int(px / char_w), 8), break_long_words=True, break_on_hyphens=False) or [""]


def _chip_rows(chips: Sequence[str], inner: float) -> list[list[str]]:
    """Interface chips in rows that fit `inner` px."""
    rows: list[list[str]] = [[]]
    used = 0.0
    for c in chips:
        w = len(c) * SMALL_W + 14
        if rows[-1] and used + w > inner:
            rows.append([])
            used = 0.0
        rows[-1].append(c)
        used += w + CHIP_GAP
    return [r for r in rows if r]


class Layout:
    """Where every member's box is, for a topology and what a flow adds to it."""

    def __init__(self, topo: Topology, notes: Notes | None = None):
        notes = notes or Notes({}, {})
        self.topo, self.notes = topo, notes
        pod_texts = [f"{p.name} {p.ip}" for p in topo.pods]
        cni = cni_of(topo)
        order = {"eth0": 0, cni.tunnel_device: 1, cni.pod_device: 2}  # underlay side first, pods' side last
        chips = {n: sorted(cs, key=lambda c: order.get(c, 3)) for n, cs in notes.chips.items()}
        rows = [sum(len(c) * SMALL_W + 14 + CHIP_GAP for c in cs) + 40 for cs in chips.values()]
        self.col_w = int(max(260, *(int(len(t) * CHAR_W) + 64 for t in pod_texts), *(min(r, MAX_COL) for r in rows)))
        texts = [f"xx {_svc_label(s)}" for s in topo.services]
        self.width = int(max(len(topo.nodes) * self.col_w + 40, 560, 30 + len(topo.externals) * (EXT_W + 20),
                             *(48 + len(t) * CHAR_W for t in texts)))
        self.boxes: dict[str, Box] = {}
        self.lines: dict[str, list[tuple[str, str]]] = {}  # member -> wrapped label lines
        ext_h = 40.0
        for i, x in enumerate(topo.externals):
            lines = [(s, d) for text, d in notes.labels.get(x.name, ()) for s in _wrap(text, EXT_W - 16, SMALL_W)]
            self.lines[x.name] = lines
            h = 40 + LINE_H * len(lines) + (6 if lines else 0)
            ext_h = max(ext_h, h)
            self.boxes[x.name] = Box(x.name, "external", 30 + i * (EXT_W + 20), 10, EXT_W, h)
        self.bar_y = 10 + ext_h + 20
        self.boxes[UNDERLAY] = Box(UNDERLAY, "underlay", 20, self.bar_y, self.width - 40, 26)
        self.node_y = self.bar_y + 50
        self.chips: dict[tuple[str, str], Box] = {}
        bottom = self.node_y
        for i, n in enumerate(topo.nodes):
            x = 20 + i * self.col_w
            y = self.node_y + 58
            for row in _chip_rows(chips.get(n.name, ()), self.col_w - 40):
                cx = x + 10
                for c in row:
                    w = len(c) * SMALL_W + 14
                    self.chips[(n.name, c)] = Box(f"{n.name}/{c}", "chip", cx, y, w, CHIP_H - 4)
                    cx += w + CHIP_GAP
                y += CHIP_H
            for p in topo.pods_on(n.name):
                self.boxes[p.name] = Box(p.name, "pod", x + 14, y + 4, self.col_w - 48, 26)
                y += POD_H
            lines = [(s, d) for text, d in notes.labels.get(n.name, ())
                     for s in _wrap(text, self.col_w - 44, SMALL_W)]
            self.lines[n.name] = lines
            y += LINE_H * len(lines) + 16
            self.boxes[n.name] = Box(n.name, "node", x, self.node_y, self.col_w - 20, y - self.node_y)
            bottom = max(bottom, y)
        self.services_y = bottom + 30
        self.height = int(self.services_y + 22 * len(topo.services) + 10)

    def anchor(self, member: str, interface: str) -> tuple[float, float] | None:
        """The point a sighting at (member, interface) is drawn at; None: the topology has no such member."""
        if member == UNDERLAY:
            bar = self.boxes[UNDERLAY]
            peer = self.boxes.get(interface[2:]) if interface[:2] in ("x-", "n-") else None
            x = peer.centre[0] if peer is not None and peer.kind in ("external", "node") else bar.centre[0]
            return x, bar.y + bar.h + 5
        chip = self.chips.get((member, interface))
        if chip is not None:  # under the chip, its name stays readable
            return chip.centre[0], chip.y + chip.h + 4
        box = self.boxes.get(member)
        if box is None:
            return None
        if box.kind == "pod":
            return box.x + box.w - 14, box.centre[1]
        if box.kind == "external":
            return box.centre[0], box.y + 24
        return box.centre


def _label_member(ch: Mapping, hop: Mapping) -> str:
    return str(ch.get("node") or hop.get("node") or hop.get("member"))


def flow_notes(flow: Mapping) -> Notes:
    """A flow's NAT labels per member that made the change, and each node's interfaces it was seen on."""
    labels: dict[str, list[tuple[str, str]]] = {}
    chips: dict[str, list[str]] = {}
    for h in flow.get("hops") or []:
        direction = str(h.get("direction") or "request")
        for ch in h.get("changed_by") or []:
            if ch.get("field") == "outer":
                continue  # encap / decap: the tunnel chip shows it
            labels.setdefault(_label_member(ch, h), []).append((change_text({**ch, "by": []}), direction))
        if h.get("member") == h.get("node") and h.get("node"):
            chips.setdefault(str(h["node"]), [])
            if h.get("interface") not in chips[str(h["node"])]:
                chips[str(h["node"])].append(str(h.get("interface")))
    return Notes(labels, chips)


def _defs(ident: str) -> str:
    marks = "".join(f'<marker id="pic-{n}-{ident}" markerWidth="9" markerHeight="9" refX="8" refY="3.5" orient="auto">'
                    f'<path d="M0,0 L8,3.5 L0,7 z" fill="{c}"/></marker>'
                    for n, c in (("req", REQUEST), ("rep", REPLY)))
    return f"<defs>{marks}</defs>"


def _base(lay: Layout, title: str) -> list[str]:
    topo = lay.topo
    bar = lay.boxes[UNDERLAY]
    out = [f'<text x="{bar.centre[0]:.0f}" y="{bar.y + 18:.0f}" text-anchor="middle">underlay '
           f'{_e(topo.underlay)} (router {_e(topo.gateway)})</text>']
    out.insert(0, f'<rect class="member" data-member="{UNDERLAY}" x="{bar.x}" y="{bar.y}" width="{bar.w}" '
                  f'height="{bar.h}" rx="13" fill="#e8eef7" stroke="#5577aa"/>')
    for x in topo.externals:
        b = lay.boxes[x.name]
        out.append(f'<rect class="member" data-member="{_e(x.name)}" x="{b.x}" y="{b.y}" width="{b.w}" '
                   f'height="{b.h}" fill="#fff3e0" stroke="#cc8800"/>')
        out.append(f'<text x="{b.x + 8}" y="{b.y + 17}">{_e(x.name)} ({_e(x.role)})</text>')
        out.append(f'<text x="{b.x + 8}" y="{b.y + 33}">{_e(x.ip)}</text>')
        out.append(f'<line x1="{b.centre[0]}" y1="{b.y + b.h}" x2="{b.centre[0]}" y2="{bar.y}" stroke="#cc8800"/>')
    for n in topo.nodes:
        b = lay.boxes[n.name]
        cx = b.centre[0]
        out.append(f'<line x1="{cx}" y1="{bar.y + bar.h}" x2="{cx}" y2="{b.y}" stroke="#5577aa"/>')
        out.append(f'<text x="{cx + 12}" y="{b.y - 6}" fill="#5577aa">{_e(n.ip)}</text>')
        out.append(f'<rect class="member" data-member="{_e(n.name)}" x="{b.x}" y="{b.y}" width="{b.w}" '
                   f'height="{b.h}" fill="#eef7ee" stroke="#338833"/>')
        out.append(f'<text x="{b.x + 8}" y="{b.y + 18}" font-weight="bold">{_e(n.name)}</text>')
        out.append(f'<text x="{b.x + 8}" y="{b.y + 34}">pods {_e(n.podCIDR)}</text>')
        out.append(f'<text x="{b.x + 8}" y="{b.y + 50}">{_e(_tunnel(topo, n) or cni_of(topo).node_label)}</text>')
        for p in topo.pods_on(n.name):
            pb = lay.boxes[p.name]
            out.append(f'<rect class="member" data-member="{_e(p.name)}" x="{pb.x}" y="{pb.y}" width="{pb.w}" '
                       f'height="{pb.h}" rx="4" fill="#ffffff" stroke="#338833"/>')
            out.append(f'<text x="{pb.x + 8}" y="{pb.y + 17}">{_e(p.name)} {_e(p.ip)}</text>')
    for (node, iface), c in lay.chips.items():
        out.append(f'<rect class="chip" data-point="{_e(node)}/{_e(iface)}" x="{c.x}" y="{c.y}" width="{c.w}" '
                   f'height="{c.h}" rx="3" fill="#ffffff" stroke="#7a9a7a"/>')
        out.append(f'<text x="{c.x + 7}" y="{c.y + 13}" font-size="10">{_e(iface)}</text>')
    if len(topo.nodes) > 1:
        first, last = lay.boxes[topo.nodes[0].name], lay.boxes[topo.nodes[-1].name]
        y = first.y + 8
        out.append(f'<line x1="{first.x + first.w}" y1="{y}" x2="{last.x}" y2="{y}" stroke="#993399" '
                   f'stroke-dasharray="5,3"/>')
        out.append(f'<text x="{first.x + first.w + 2}" y="{y - 3}" fill="#993399" font-size="10">'
                   f'{_e(cni_of(topo).overlay_label)}</text>')
    for k, s in enumerate(topo.services):
        out.append(f'<text x="24" y="{lay.services_y + k * 22}">&#x2B21; {_e(_svc_label(s))}</text>')
    if title:
        out.insert(0, f"<title>{_e(title)}</title>")
    return out


def _labels(lay: Layout) -> list[str]:
    """Each member's NAT labels, inside its box under what is already there."""
    out = []
    for member, lines in lay.lines.items():
        if not lines:
            continue
        b = lay.boxes[member]
        y = b.y + b.h - 10 - LINE_H * (len(lines) - 1) - (2 if b.kind == "node" else 0)
        for i, (s, d) in enumerate(lines):
            colour = REPLY if d == "reply" else REQUEST
            out.append(f'<text class="nat" data-member="{_e(member)}" x="{b.x + 10}" y="{y + i * LINE_H:.0f}" '
                       f'font-size="10" fill="{colour}">{_e(s)}</text>')
    return out


def _arrows(lay: Layout, hops: Sequence[Mapping], ident: str) -> tuple[list[str], list[str]]:
    """The request and reply arrows, and the members the topology lacks."""
    out, missing = [], []
    prev: tuple[float, float] | None = None
    prev_dir = None
    for h in hops:
        d = str(h.get("direction") or "request")
        at = lay.anchor(str(h.get("member") or h.get("node")), str(h.get("interface")))
        if at is None:
            missing.append(hop_point(h))
            continue
        at = (at[0] + (4 if d == "reply" else -4), at[1])
        colour, name = (REPLY, "rep") if d == "reply" else (REQUEST, "req")
        out.append(f'<circle class="sighting" data-point="{_e(hop_point(h))}" cx="{at[0]:.0f}" cy="{at[1]:.0f}" '
                   f'r="3.5" fill="{colour}"/>')
        if prev is not None and prev_dir == d and prev != at:
            dash = ' stroke-dasharray="6,3"' if d == "reply" else ""
            out.append(f'<line class="path-{d}" x1="{prev[0]:.0f}" y1="{prev[1]:.0f}" x2="{at[0]:.0f}" '
                       f'y2="{at[1]:.0f}" stroke="{colour}" stroke-width="2"{dash} '
                       f'marker-end="url(#pic-{name}-{ident})"/>')
        prev, prev_dir = at, d
    return out, list(dict.fromkeys(missing))


def _cross(lay: Layout, flow: Mapping) -> list[str]:
    """The red cross on the capture point the verdict names (else the member it died on)."""
    verdict = flow.get("verdict") or {}
    hops = list(flow.get("hops") or [])
    i = dying_index(flow)
    if not verdict or i is None:
        return []
    h = hops[i]
    point = str(verdict.get("point") or hop_point(h))
    member, _, iface = point.partition("/")
    at = lay.anchor(member, iface) or lay.anchor(str(h.get("member") or h.get("node")), str(h.get("interface")))
    if at is None:
        return []
    x, y = at
    return [f'<g class="died" data-point="{_e(point)}" data-member="{_e(member)}"><title>died: '
            f'{_e(str(verdict.get("text") or ""))}</title>'
            + "".join(f'<line x1="{x - 9:.0f}" y1="{y - 9 * s:.0f}" x2="{x + 9:.0f}" y2="{y + 9 * s:.0f}" '
                      f'stroke="{DEAD}" stroke-width="4"/>' for s in (1, -1)) + "</g>"]


def _legend(lay: Layout, y: float, missing: Sequence[str], died: bool, ident: str) -> tuple[list[str], float]:
    out = [f'<line x1="24" y1="{y - 4}" x2="60" y2="{y - 4}" stroke="{REQUEST}" stroke-width="2" '
           f'marker-end="url(#pic-req-{ident})"/><text x="66" y="{y}">request</text>',
           f'<line x1="150" y1="{y - 4}" x2="186" y2="{y - 4}" stroke="{REPLY}" stroke-width="2" '
           f'stroke-dasharray="6,3" marker-end="url(#pic-rep-{ident})"/><text x="192" y="{y}">reply</text>']
    if died:
        out.append(f'<text x="260" y="{y}" fill="{DEAD}" font-weight="bold">&#x2717; where it died</text>')
    for m in missing:
        y += 18
        for s in _wrap(f"not on this picture (no such member in the topology): {m}", lay.width - 48):
            out.append(f'<text class="missing" x="24" y="{y}">{_e(s)}</text>')
            y += 16
        y -= 16
    return out, y + 10


def topology_picture(topo: Topology) -> str:
    """The topology alone as an inline SVG."""
    lay = Layout(topo)
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="topology" width="{lay.width}" height="{lay.height}" '
            f'viewBox="0 0 {lay.width} {lay.height}" font-family="monospace" font-size="12">')
    return "\n".join([head, *_base(lay, ""), "</svg>"])


def path_picture(topo: Topology, flow: Mapping) -> str:
    """The topology with `flow`'s representative connection drawn on it, as a standalone SVG document."""
    lay = Layout(topo, flow_notes(flow))
    hops = list(flow.get("hops") or [])
    ident = re.sub(r"[^A-Za-z0-9_-]", "_", str(flow.get("name")))  # the page's marker ids, one set a flow
    arrows, missing = _arrows(lay, hops, ident)
    cross = _cross(lay, flow)
    legend, height = _legend(lay, lay.height + 8, missing, bool(cross), ident)
    name = _e(str(flow.get("name")))
    head = (f'<svg xmlns="http://www.w3.org/2000/svg" class="path-picture" data-flow="{name}" width="{lay.width}" '
            f'height="{height:.0f}" viewBox="0 0 {lay.width} {height:.0f}" font-family="monospace" font-size="12">')
    title = f"{flow.get('name')}: {flow.get('from')} -> {flow.get('to')} ({flow.get('protocol')})"
    return "\n".join([head, _defs(ident), *_base(lay, title), *_labels(lay),
                      f'<g class="path" data-flow="{name}">', *arrows, "</g>", *cross, *legend, "</svg>"]) + "\n"
