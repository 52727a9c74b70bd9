"""The topology as a picture (pure): Mermaid, Graphviz dot, and inline SVG / HTML.

Nodes carry their addresses (node IP, podCIDR, tunnel address), pods their IPs, services their
ClusterIP and NodePorts; links show the underlay, the overlay (VXLAN / IPIP) and pod attachment.
"""

from __future__ import annotations

import html
import re

from kpemu.cni import cni_of
from kpemu.model.topology import Topology
from kpemu.report.picture import topology_picture

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
    """An inline SVG: externals and underlay on top, nodes below with their pods, services listed
    (kpemu.report.picture, which also draws a flow's path on it)."""
    return topology_picture(topo)


def topology_html(topo: Topology) -> str:
    """A self-contained page with the SVG and the Mermaid / dot sources."""
    e = html.escape
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{e(topo.name)} topology</title></head>"
            f"<body><h1>{e(topo.name)}</h1>\n{topology_svg(topo)}\n<h2>Mermaid</h2><pre>{e(topology_mermaid(topo))}"
            f"</pre><h2>dot</h2><pre>{e(topology_dot(topo))}</pre></body></html>\n")


def render_graph(topo: Topology, fmt: str) -> str:
    """The topology in `fmt` (mermaid | dot | html)."""
    return {"mermaid": topology_mermaid, "dot": topology_dot, "html": topology_html}[fmt](topo)
