"""The topology as a picture (pure): Mermaid, Graphviz dot, and inline SVG / HTML.

Nodes carry their addresses (node IP, podCIDR, tunnel address), pods their IPs, services their
ClusterIP and NodePorts; links show the underlay, the overlay (VXLAN / IPIP) and pod attachment.
"""

from __future__ import annotations

import html
import re

from kpemu.cni import cni_of
from kpemu.model.topology import Topology

FORMATS = ("mermaid", "dot", "html")
NL = "\\n"  # a line break inside a dot label


def _id(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", name)


def _overlay(topo: Topology) -> str:
    return cni_of(topo).overlay_label


def _tunnel(topo: Topology, n) -> str:
    """The node's tunnel device and its address, when the topology gives one."""
    return f"{cni_of(topo).tunnel_device} {n.tunnelIP}" if n.tunnelIP else ""


def _node_label(topo: Topology, n) -> str:
    return " ".join(filter(None, (f"{n.name}: {n.ip} pods {n.podCIDR}", _tunnel(topo, n))))


def _svc_label(s) -> str:
    ports = ", ".join(f"{p.port}/{p.protocol}" + (f" nodePort {p.nodePort}" if p.nodePort else "") for p in s.ports)
    lb = f" LB {', '.join(s.loadBalancerIPs)}" if s.loadBalancerIPs else ""
    return f"{s.namespace}/{s.name} {s.type} {s.clusterIP} {ports}{lb}"


def topology_mermaid(topo: Topology) -> str:
    """`flowchart LR` of the lab."""
    out = ["flowchart LR", f"    underlay((\"underlay {topo.underlay}\"))"]
    for e in topo.externals:
        out.append(f"    ext_{_id(e.name)}[\"{e.name} ({e.role}) {e.ip}\"] ---|\"{e.network}\"| underlay")
    for n in topo.nodes:
        out.append(f"    node_{_id(n.name)}[\"{_node_label(topo, n)}\"] ---|\"{n.ip}\"| underlay")
        for p in topo.pods_on(n.name):
            out.append(f"    pod_{_id(p.name)}([\"{p.namespace}/{p.name} {p.ip}\"]) ---|\"veth\"| node_{_id(n.name)}")
    for a, b in zip(topo.nodes, topo.nodes[1:], strict=False):
        out.append(f"    node_{_id(a.name)} -.-|\"{_overlay(topo)}\"| node_{_id(b.name)}")
    for s in topo.services:
        out.append(f"    svc_{_id(s.namespace)}_{_id(s.name)}{{{{\"{_svc_label(s)}\"}}}}")
    return "\n".join(out) + "\n"


def topology_dot(topo: Topology) -> str:
    """Graphviz `graph` of the lab."""
    q = lambda s: '"' + s.replace('"', '\\"') + '"'  # noqa: E731
    out = [f"graph {q(topo.name)} {{", "  rankdir=LR;", "  node [fontname=monospace];",
           f"  underlay [shape=ellipse, label={q('underlay ' + topo.underlay)}];"]
    for e in topo.externals:
        lbl = q(f"{e.name} ({e.role})" + NL + e.ip)
        out.append(f"  {q('ext:' + e.name)} [shape=box, label={lbl}];")
        out.append(f"  {q('ext:' + e.name)} -- underlay [label={q(str(e.network))}];")
    for n in topo.nodes:
        lab = _node_label(topo, n).replace(": ", NL, 1)
        out.append(f"  {q('node:' + n.name)} [shape=box3d, label={q(lab)}];")
        out.append(f"  {q('node:' + n.name)} -- underlay [label={q(n.ip)}];")
        for p in topo.pods_on(n.name):
            lbl = q(p.name + NL + p.ip)
            out.append(f"  {q('pod:' + p.name)} [shape=component, label={lbl}];")
            out.append(f"  {q('pod:' + p.name)} -- {q('node:' + n.name)} [label=veth];")
    for a, b in zip(topo.nodes, topo.nodes[1:], strict=False):
        out.append(f"  {q('node:' + a.name)} -- {q('node:' + b.name)} [style=dashed, label={q(_overlay(topo))}];")
    for s in topo.services:
        out.append(f"  {q('svc:' + s.name)} [shape=hexagon, label={q(_svc_label(s))}];")
    out.append("}")
    return "\n".join(out) + "\n"


def topology_svg(topo: Topology) -> str:
    """An inline SVG: externals and underlay on top, nodes below with their pods, services listed."""
    e = html.escape
    pod_h, char_w = 34, 7.3  # 12px monospace: 7.3px a character
    pod_texts = [f"{p.name} {p.ip}" for p in topo.pods]
    col_w = max(260, *(int(len(t) * char_w) + 64 for t in pod_texts))  # the widest pod label sets the columns
    ncols = max(len(topo.nodes), 1)
    texts = [f"xx {_svc_label(s)}" for s in topo.services]  # the widest text sets the width too
    width = max(ncols * col_w + 40, 560, 30 + len(topo.externals) * 240, *(int(48 + len(t) * char_w) for t in texts))
    max_pods = max((len(topo.pods_on(n.name)) for n in topo.nodes), default=0)
    height = 200 + max_pods * pod_h + 40 + 22 * len(topo.services) + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="topology" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="12">',
           f'<rect x="20" y="70" width="{width - 40}" height="26" rx="13" fill="#e8eef7" stroke="#5577aa"/>',
           f'<text x="{width // 2}" y="88" text-anchor="middle">underlay {e(topo.underlay)} '
           f'(router {e(topo.gateway)})</text>']
    for i, x in enumerate(topo.externals):
        cx = 30 + i * 240
        out.append(f'<rect x="{cx}" y="10" width="220" height="40" fill="#fff3e0" stroke="#cc8800"/>')
        out.append(f'<text x="{cx + 8}" y="27">{e(x.name)} ({e(x.role)})</text>')
        out.append(f'<text x="{cx + 8}" y="43">{e(x.ip)}</text>')
        out.append(f'<line x1="{cx + 110}" y1="50" x2="{cx + 110}" y2="70" stroke="#cc8800"/>')
    for i, n in enumerate(topo.nodes):
        x = 20 + i * col_w
        out.append(f'<line x1="{x + 110}" y1="96" x2="{x + 110}" y2="120" stroke="#5577aa"/>')
        out.append(f'<text x="{x + 114}" y="112" fill="#5577aa">{e(n.ip)}</text>')
        h = 70 + len(topo.pods_on(n.name)) * pod_h
        out.append(f'<rect x="{x}" y="120" width="{col_w - 20}" height="{h}" fill="#eef7ee" stroke="#338833"/>')
        out.append(f'<text x="{x + 8}" y="138" font-weight="bold">{e(n.name)}</text>')
        out.append(f'<text x="{x + 8}" y="154">pods {e(n.podCIDR)}</text>')
        out.append(f'<text x="{x + 8}" y="170">{e(_tunnel(topo, n) or cni_of(topo).node_label)}</text>')
        for j, p in enumerate(topo.pods_on(n.name)):
            y = 180 + j * pod_h
            out.append(f'<rect x="{x + 14}" y="{y}" width="{col_w - 48}" height="26" rx="4" fill="#ffffff" '
                       f'stroke="#338833"/>')
            out.append(f'<text x="{x + 22}" y="{y + 17}">{e(p.name)} {e(p.ip)}</text>')
    if len(topo.nodes) > 1:
        y = 128
        x1, x2 = 20 + col_w - 20, 20 + (len(topo.nodes) - 1) * col_w
        out.append(f'<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="#993399" stroke-dasharray="5,3"/>')
        out.append(f'<text x="{x1 + 2}" y="{y - 3}" fill="#993399" font-size="10">{e(_overlay(topo))}</text>')
    y0 = 200 + max_pods * pod_h + 40
    for k, s in enumerate(topo.services):
        out.append(f'<text x="24" y="{y0 + k * 22}">&#x2B21; {e(_svc_label(s))}</text>')
    out.append("</svg>")
    return "\n".join(out)


def topology_html(topo: Topology) -> str:
    """A self-contained page with the SVG and the Mermaid / dot sources."""
    e = html.escape
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{e(topo.name)} topology</title></head>"
            f"<body><h1>{e(topo.name)}</h1>\n{topology_svg(topo)}\n<h2>Mermaid</h2><pre>{e(topology_mermaid(topo))}"
            f"</pre><h2>dot</h2><pre>{e(topology_dot(topo))}</pre></body></html>\n")


def render_graph(topo: Topology, fmt: str) -> str:
    """The topology in `fmt` (mermaid | dot | html)."""
    return {"mermaid": topology_mermaid, "dot": topology_dot, "html": topology_html}[fmt](topo)
