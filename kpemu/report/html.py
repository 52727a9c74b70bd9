"""report.html (pure): one self-contained page, no network, no JavaScript, everything report.md has.

A table of contents; the run's files linked (pcapng, per-interface captures, rules, traces); the
topology as inline SVG; per flow the hop table with each hop's frame in the run's pcapng, the
tshark/Wireshark command that follows the connection, the connections, conntrack and IPVS entries,
the chains and hook walk of the first packet, the hook claim, model vs kernel, the rule counters
that moved, the IPVS decisions, and the sequence diagram as inline SVG (Mermaid source alongside).
Wide things (diagrams, tables) scroll inside their own box; no text is cut.

Input is hops.json's dict (kpemu.report.runreport.RunReport), the topology, optionally per-hop extras
(`details[flow][hop index] = {"rules": [...], "capture": [...]}`) and the run's files (relative paths).
"""

from __future__ import annotations

import html
import textwrap
from collections.abc import Mapping, Sequence

from kpemu.model.topology import Topology
from kpemu.report.graph import topology_svg
from kpemu.report.mermaid import change_text, hop_point, sequence_diagram, tuple_text
from kpemu.report.runreport import RunReport
from kpemu.report.table import DIED, hop_numbers, opened_line, verdict_lines
from kpemu.report.wireshark import RUN_PCAPNG, commands, flow_pcapng

_CSS = """body{font-family:sans-serif;margin:20px auto;max-width:1240px;padding:0 12px;line-height:1.35}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #bbb;padding:3px 6px;vertical-align:top;
text-align:left}th{background:#eee}pre,code{font-size:12px}pre{background:#f6f6f6;padding:8px;margin:4px 0;
white-space:pre-wrap;overflow-wrap:anywhere}.ok{color:#060;font-weight:bold}.fail{color:#a00;font-weight:bold}
details{margin:2px 0}svg text{font-family:monospace}.box{overflow-x:auto;max-width:100%;margin:6px 0}
nav.toc{background:#f3f6fb;border:1px solid #ccd;padding:6px 14px;display:inline-block}
nav.toc ul{margin:4px 0;padding-left:18px}table.checks td{min-width:7em}"""
_CHAR = 6.8  # px per character of 11px monospace, with some slack
_ROW, _TOP, _NOTE_CHARS = 40, 60, 96

_e = html.escape


def _esc(value: object) -> str:
    return _e("" if value is None else str(value))


def _lines(text: str, width: int = _NOTE_CHARS) -> list[str]:
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


def sequence_svg(flow: Mapping) -> str:
    """The flow's sequence diagram as SVG: a lifeline per capture point, an arrow per sighting, notes.

    Sized to its text: lanes as wide as the longest point name, notes wrapped, nothing truncated;
    a diagram wider than the page scrolls inside its box.
    """
    hops = list(flow.get("hops") or [])
    parts = list(dict.fromkeys(hop_point(h) for h in hops))
    col = max([170, *(int(len(p) * _CHAR) + 28 for p in parts)])
    x = {p: 20 + i * col + col // 2 for i, p in enumerate(parts)}
    body: list[str] = []
    right = 20 + len(parts) * col
    y, prev = _TOP, None
    verdict = flow.get("verdict") or {}
    dying = max((i for i, h in enumerate(hops) if h.get("direction") == verdict.get("direction", "request")),
                default=None) if verdict else None
    for i, h in enumerate(hops):
        cur = x[hop_point(h)]
        src = x[hop_point(prev)] if prev is not None and prev.get("direction") == h.get("direction") else cur - 40
        src = cur - 40 if src == cur else src
        reply = h.get("direction") == "reply"
        color, dash = ("#2a6", ' stroke-dasharray="6,3"') if reply else ("#333", "")
        label = tuple_text(h) + (f"  (frame {h['frame']})" if h.get("frame") else "")
        lx = min(src, cur) + 4
        right = max(right, int(lx + len(label) * _CHAR))
        body.append(f'<line class="msg" x1="{src}" y1="{y}" x2="{cur}" y2="{y}" stroke="{color}"{dash} '
                    f'marker-end="url(#arr)"/><text x="{lx}" y="{y - 5}" fill="{color}">{_e(label)}</text>')
        if i == dying:  # the packet died here
            body.append(f'<text class="died" x="{cur + 4}" y="{y + 5}" fill="#c00" font-size="16">{DIED}</text>')
        y += _ROW // 2
        for ch in h.get("changed_by") or []:
            lines = _lines(change_text(ch))
            w = int(max(len(s) for s in lines) * _CHAR) + 12
            left = max(min(cur - 20, 20 + len(parts) * col - w), 10)  # inside the lanes when it fits
            right = max(right, left + w)
            height = 8 + 14 * len(lines)
            tspans = "".join(f'<tspan x="{left + 6}" dy="{14 if i else 0}">{_e(s)}</tspan>'
                             for i, s in enumerate(lines))
            body.append(f'<g><rect class="note" x="{left}" y="{y - 4}" width="{w}" height="{height}" fill="#fff8c4" '
                        f'stroke="#c9b400"/><text x="{left + 6}" y="{y + 10}">{tspans}</text></g>')
            y += height + 8
        y += _ROW // 2
        prev = h
    width, height = right + 20, y + 10
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" class="sequence" width="{width}" height="{height}" '
           f'viewBox="0 0 {width} {height}" font-size="11">',
           '<defs><marker id="arr" markerWidth="8" markerHeight="8" refX="7" refY="3" orient="auto">'
           '<path d="M0,0 L7,3 L0,6 z" fill="#333"/></marker></defs>']
    for p in parts:
        out.append(f'<rect x="{x[p] - col // 2 + 6}" y="10" width="{col - 12}" height="28" fill="#e8eef7" '
                   f'stroke="#5577aa"/><text x="{x[p]}" y="28" text-anchor="middle">{_e(p)}</text>')
        out.append(f'<line x1="{x[p]}" y1="38" x2="{x[p]}" y2="{height - 10}" stroke="#99a" stroke-dasharray="4,3"/>')
    return "\n".join([*out, *body, "</svg>"])


def _ep(ip: object, port: object) -> str:
    return f"{ip}:{port}" if port is not None else str(ip)


def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], cls: str = "") -> str:
    """A table in its own scrolling box; cells are HTML already."""
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    attr = f' class="{cls}"' if cls else ""
    return f'<div class="box"><table{attr}><tr>{head}</tr>{body}</table></div>'


def _pre(lines: Sequence[str]) -> str:
    return f"<pre>{_e(chr(10).join(lines))}</pre>"


def _link(path: str, files: set[str], text: str | None = None) -> str:
    return f'<a href="{_e(path)}">{_e(text or path)}</a>' if path in files else _e(text or path)


def _hop_table(flow: Mapping, details: Mapping[int, Mapping] | None, files: set[str]) -> str:
    rows = []
    hops = flow.get("hops") or []
    for i, (num, h) in enumerate(zip(hop_numbers(hops), hops, strict=True)):
        chs = h.get("changed_by") or []
        d = (details or {}).get(i) or {}
        extra = [f"<details><summary>{key} ({len(d[key])})</summary>{_pre(d[key])}</details>"
                 for key in ("rules", "capture") if d.get(key)]
        outer = h.get("outer")
        dst = _ep(h.get("dst"), h.get("dport"))
        if outer:
            vni = f" vni {outer.get('vni')}" if outer.get("vni") is not None else ""
            dst += f" in {outer.get('type')}{vni} {outer.get('src')} > {outer.get('dst')}"
        capture = f"capture/{h.get('netns')}_{h.get('interface')}.txt"
        rows.append([num, _esc(h.get("frame") or ""), _link(capture, files, hop_point(h)),
                     _esc(_ep(h.get("src"), h.get("sport"))), _esc(dst), _esc(h.get("flags") or h.get("proto")),
                     "<br>".join(_esc(change_text({**c, "by": []})) for c in chs),
                     "<br>".join(_esc(b) for c in chs for b in (c.get("by") or [])), "".join(extra)])
    return _table(["hop", "frame", "where", "src", "dst", "flags", "what changed", "by", "details"], rows, "hops")


def _connections(flow: Mapping) -> str:
    conns = flow.get("connections") or []
    if len(conns) < 2:
        return ""
    rows = []
    for c in conns:
        req = [h for h in c.get("hops") or [] if h.get("direction") != "reply"]
        last = req[-1] if req else None
        at = f"{hop_point(last)}: {tuple_text({**last, 'flags': None, 'outer': None})}" if last else ""
        first = (c.get("hops") or [{}])[0].get("frame")
        rows.append([_esc(c.get("index")), _esc(c.get("outcome")), _esc(c.get("backend") or ""), _esc(at),
                     _esc(first or "")])
    return "<h3>Connections</h3>" + _table(["conn", "outcome", "backend", "tuple at the backend", "first frame"],
                                           rows, "connections")


def _wireshark(flow: Mapping, files: set[str]) -> str:
    conns = [c for c in flow.get("connections") or [] if c.get("hops")]
    if not conns:
        return ""
    name, conn = str(flow.get("name")), int(conns[0].get("index", 0))
    tshark, wireshark = commands(RUN_PCAPNG, name, conn)
    return (f"<p>Follow connection {conn} hop by hop in {_link(RUN_PCAPNG, files)} (this flow alone: "
            f"{_link(flow_pcapng(name), files)}); each frame's interface is its capture point and its comment "
            f"names the hop:</p><pre class=\"commands\">{_e(tshark)}\n{_e(wireshark)}</pre>")


def _explanation(flow: Mapping) -> str:
    """The same explanation report.md gives: chains and hook walk, the hook claim, oracle, counters, IPVS."""
    out: list[str] = []
    trace = flow.get("trace") or {}
    if trace and not trace.get("available"):
        out.append(f"<p>Rule tracing: not available ({_esc(trace.get('reason'))}).</p>")
    chains, hooks = flow.get("chains") or {}, flow.get("hooks") or {}
    if chains or hooks:
        rows = [[_esc(node), _esc(" -> ".join(chains.get(node) or []) or "(none)"),
                 _esc((hooks.get(node) or {}).get("text", ""))] for node in dict.fromkeys([*hooks, *chains])]
        out.append("<p>First packet, per node (from the trace):</p>"
                   + _table(["node", "kube-proxy chains (nat)", "hook walk"], rows, "hooks"))
    claim = flow.get("hook_claim")
    if claim:
        word = "holds" if claim.get("right") else "does not hold"
        out.append(f"<p>Hook claim &quot;{_esc(claim.get('sentence'))}&quot; on {_esc(claim.get('node'))}: "
                   f"<b class=\"{'ok' if claim.get('right') else 'fail'}\">{word}</b>. {_esc(claim.get('text'))}</p>")
    oracle = flow.get("oracle") or {}
    if oracle:
        agree = oracle.get("agree")
        word = {True: "agree", False: "DISAGREE", None: "not checked"}[agree]
        cls = {True: "ok", False: "fail", None: ""}[agree]
        out.append(f"<p>Model oracle vs kernel: <b class=\"{cls}\">{word}</b>. {_esc(oracle.get('text'))}</p>")
        if oracle.get("disagreements"):
            out.append(_pre([str(d) for d in oracle["disagreements"]]))
    for node, rows in (flow.get("counters") or {}).items():
        kube = [r for r in rows if "KUBE-" in r["rule"] or "MASQUERADE" in r["rule"]]
        if kube:
            out.append(f"<p>Rule counters that moved on {_esc(node)} (<code>iptables-save -c</code> before and after "
                       f"the flow):</p>" + _pre([f"[{r['packets']}] {r['table']} {r['rule']}" for r in kube]))
    for node, decs in (flow.get("ipvs_decisions") or {}).items():
        out.append(f"<p>IPVS decisions on {_esc(node)} (connection counters):</p>"
                   + _pre([f"{d['text']} x{d['connections']}" for d in decs]))
    return "<h3>Explanation</h3>" + "".join(out) if out else ""


# a flow's heading by whether its expectations held (None: it had none)
_STATE = {True: ("ok", "ok"), False: ("fail", "failed"), None: ("", "no expectation")}
_TOC_STATE = {True: "", False: " (failed)", None: " (no expectation)"}


def _flow(flow: Mapping, details: Mapping[int, Mapping] | None, files: set[str]) -> str:
    name = str(flow.get("name"))
    ok = flow.get("ok")
    died = flow.get("verdict")
    mark = f"<span class=\"{_STATE[ok][0]}\">{_STATE[ok][1]}</span>"
    if died:  # a death the flow expected is no failure; the heading says ok only when every expectation held
        mark += f" <span class=\"{'fail' if ok is False else 'died'}\">{DIED} died on {_esc(died.get('at'))}</span>"
    out = [f"<section id=\"flow-{_e(name)}\"><h2>Flow {_e(name)}: {_esc(flow.get('from'))} -&gt; "
           f"{_esc(flow.get('to'))} ({_esc(flow.get('protocol'))}) {mark}</h2>"]
    conns = flow.get("connections") or []
    outcomes = [str(c.get("outcome")) for c in conns]
    summary = f"{len(conns)} connection(s): " + ", ".join(f"{o} x{outcomes.count(o)}" for o in sorted(set(outcomes)))
    if flow.get("backends"):
        summary += f"; answered by {', '.join(flow['backends'])}"
    out.append(f"<p>{_e(summary)}</p>")
    answered = next((c for c in conns if c.get("status") is not None
                     or (c.get("sport") is None and c.get("reply"))), None)  # HTTP, or a container client
    if answered:
        status = f" HTTP {answered['status']}" if answered.get("status") is not None else ""
        out.append(f"<p>connection {_esc(answered.get('index'))} got{_e(status)}:</p>"
                   f"<pre>{_e(str(answered.get('reply') or '(empty)')[:400])}</pre>")
    rep = next((c for c in conns if c.get("hops")), None)
    if flow.get("hops"):
        if rep is not None:
            out.append(f"<h3>Hops of connection {_esc(rep.get('index'))}</h3><p>marker <code>"
                       f"{_esc(rep.get('marker'))}</code>, outcome {_esc(rep.get('outcome'))}"
                       + (f", backend {_esc(rep.get('backend'))}" if rep.get("backend") else "") + "</p>")
        out.append(_hop_table(flow, details, files))
        if died:
            out.append("".join(f'<p class="fail">{_e(line)}</p>' for line in verdict_lines(died)))
        if rep is not None and opened_line(rep):
            out.append(f"<p>{_e(str(opened_line(rep)))}</p>")
        out.append(_wireshark(flow, files))
    else:
        out.append("<p>No packet of this flow was captured.</p>")
    out.append(_connections(flow))
    for key, title in (("conntrack", "conntrack"), ("ipvs", "IPVS connections")):
        if flow.get(key):
            out.append(f"<h3>{title}</h3>" + _pre([f"{c.get('node')}: {c.get('line', c)}" for c in flow[key]]))
    out.append(_explanation(flow))
    if flow.get("hops"):
        out.append(f"<h3>Sequence</h3><div class=\"box diagram\">{sequence_svg(flow)}</div>"
                   f"<details><summary>Mermaid source</summary><pre class=\"mermaid-source\">"
                   f"{_e(sequence_diagram(flow))}</pre></details>")
    out.append("</section>")
    return "\n".join(o for o in out if o)


def _files(files: Sequence[str]) -> str:
    groups = [("Packets", [f for f in files if f.endswith((".pcapng", ".pcap"))]),
              ("Captures as text (tcpdump -nn -r)", [f for f in files if f.startswith("capture/")]),
              ("Rules and IPVS state", [f for f in files if f.startswith("rules/")]),
              ("Netfilter traces", [f for f in files if f.startswith("trace/")]),
              ("Data", [f for f in files if f in ("hops.json", "report.md")])]
    have = set(files)
    out = ["<section id=\"files\"><h2>Files</h2>"]
    for title, names in groups:
        if names:
            out.append(f"<p>{_e(title)}:</p><ul>" + "".join(f"<li>{_link(n, have)}</li>" for n in names) + "</ul>")
    return "".join(out) + "</section>"


def _checks(checks: Sequence[Mapping]) -> str:
    rows = []
    for c in checks:
        cls, verdict = ("ok", "PASS") if c.get("ok") else ("fail", "FAIL")
        seen = _pre([str(c.get("seen", ""))]) + (f"<pre>{_esc(c['diff'])}</pre>" if c.get("diff") else "")
        rows.append([_esc(c.get("flow")), _esc(c.get("what")), f'<span class="{cls}">{verdict}</span>',
                     _esc(c.get("expected")), seen])
    return "<section id=\"expectations\"><h2>Expectations</h2>" + \
        _table(["flow", "check", "result", "expected", "seen"], rows, "checks") + "</section>"


def render_html(hops: RunReport, topo: Topology | None = None,
                details: Mapping[str, Mapping[int, Mapping]] | None = None,
                extra_sections: Mapping[str, str] | None = None, files: Sequence[str] = ()) -> str:
    """The whole report page (a string; nothing is fetched when it is opened). `files`: the run's
    files relative to its directory, linked from the page."""
    ok = hops.get("ok")
    flows = list(hops.get("flows") or [])
    checks = list(hops.get("checks") or [])
    have = set(files)
    facts = [("runtime", f"{hops.get('runtime', '')}" + (f" ({hops['reason']})" if hops.get("reason") else "")),
             ("kernel", hops.get("kernel")), ("kube-proxy mode", hops.get("mode")), ("lab", hops.get("lab")),
             ("duration", f"{hops['seconds']:.2f}s" if isinstance(hops.get("seconds"), int | float) else None)]
    toc = [("topology", "Topology")] if topo is not None else []
    toc += [(f"flow-{f.get('name')}", f"Flow {f.get('name')}" + _TOC_STATE[f.get("ok")]) for f in flows]
    toc += [(f"extra-{i}", t) for i, t in enumerate(extra_sections or {})]
    toc += ([("expectations", "Expectations")] if checks else []) + ([("files", "Files")] if files else [])
    out = [f"<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
           f"<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">"
           f"<title>kpemu {_esc(hops.get('scenario', ''))}</title><style>{_CSS}</style></head><body>",
           f"<h1>{_esc(hops.get('scenario', 'kpemu run'))} "
           f"<span class=\"{'ok' if ok else 'fail'}\">{'PASS' if ok else 'FAIL'}</span></h1>",
           "<ul class=\"facts\">" + "".join(f"<li>{_e(k)}: {_esc(v)}</li>" for k, v in facts if v) + "</ul>",
           "<nav class=\"toc\"><b>Contents</b><ul>"
           + "".join(f'<li><a href="#{_e(a)}">{_e(t)}</a></li>' for a, t in toc) + "</ul></nav>"]
    if topo is not None:
        out.append(f"<section id=\"topology\"><h2>Topology</h2><div class=\"box\">{topology_svg(topo)}</div></section>")
    out += [_flow(f, (details or {}).get(str(f.get("name"))), have) for f in flows]
    for i, (title, body) in enumerate((extra_sections or {}).items()):
        out.append(f"<section id=\"extra-{i}\"><h2>{_e(title)}</h2><pre>{_e(body)}</pre></section>")
    if checks:
        out.append(_checks(checks))
    if files:
        out.append(_files(files))
    out.append("</body></html>\n")
    return "\n".join(out)
