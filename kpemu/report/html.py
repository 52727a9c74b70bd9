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
from collections.abc import Mapping, Sequence

from kpemu.model.topology import Topology
from kpemu.report.graph import topology_svg
from kpemu.report.mermaid import change_text, hop_point, sequence_diagram, tuple_text
from kpemu.report.picture import path_picture
from kpemu.report.runreport import RunReport
from kpemu.report.sequence import sequence_svg
from kpemu.report.table import DIED, hop_numbers, opened_line, verdict_lines
from kpemu.report.wireshark import RUN_PCAPNG, commands, flow_pcapng

_CSS = """body{font-family:sans-serif;margin:20px auto;max-width:1240px;padding:0 12px;line-height:1.35}
table{border-collapse:collapse;font-size:13px}td,th{border:1px solid #bbb;padding:3px 6px;vertical-align:top;
text-align:left}th{background:#eee}pre,code{font-size:12px}pre{background:#f6f6f6;padding:8px;margin:4px 0;
white-space:pre-wrap;overflow-wrap:anywhere}.ok{color:#060;font-weight:bold}.fail{color:#a00;font-weight:bold}
details{margin:2px 0}svg text{font-family:monospace}.box{overflow-x:auto;max-width:100%;margin:6px 0}
nav.toc{background:#f3f6fb;border:1px solid #ccd;padding:6px 14px;display:inline-block}
nav.toc ul{margin:4px 0;padding-left:18px}table.checks td{min-width:7em}.picture svg{max-width:100%;height:auto}"""

_e = html.escape


def _esc(value: object) -> str:
    return _e("" if value is None else str(value))


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


PICTURES = "pictures"  # a run folder's path pictures


def picture_file(flow_name: str, ext: str) -> str:
    """Where a run keeps a flow's path picture (svg | png), relative to the run folder."""
    return f"{PICTURES}/path-{flow_name}.{ext}"


def _path(flow: Mapping, topo: Topology, files: set[str]) -> str:
    """The flow's path on the topology picture, with its files when the run wrote them."""
    name = str(flow.get("name"))
    links = [_link(picture_file(name, ext), files) for ext in ("svg", "png") if picture_file(name, ext) in files]
    png = "" if picture_file(name, "png") in files else " (<code>kpemu runs picture RUN</code> draws it as PNG)"
    note = f"<p>The picture as a file: {', '.join(links)}{png}</p>" if links else ""
    return (f"<h3>Path</h3><div class=\"box picture\">{path_picture(topo, flow)}</div>"
            f"<p>Solid: the request, dashed: the reply, from capture point to capture point; a NAT change is "
            f"labelled in the box of the member that made it.</p>{note}")


def _flow(flow: Mapping, details: Mapping[int, Mapping] | None, files: set[str], topo: Topology | None = None) -> str:
    name = str(flow.get("name"))
    ok = flow.get("ok")
    died = flow.get("verdict")
    mark = f"<span class=\"{_STATE[ok][0]}\">{_STATE[ok][1]}</span>"
    if died:  # a death the flow expected is no failure; the heading says ok only when every expectation held
        mark += f" <span class=\"{'fail' if ok is False else 'died'}\">{DIED} died on {_esc(died.get('at'))}</span>"
    out = [f"<section id=\"flow-{_e(name)}\"><h2>Flow {_e(name)}: {_esc(flow.get('from'))} -&gt; "
           f"{_esc(flow.get('to'))} ({_esc(flow.get('protocol'))}) {mark}</h2>"]
    if flow.get("hops") and topo is not None:  # the flow opens with its path on the picture
        out.append(_path(flow, topo, files))
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
    out += [_flow(f, (details or {}).get(str(f.get("name"))), have, topo) for f in flows]
    for i, (title, body) in enumerate((extra_sections or {}).items()):
        out.append(f"<section id=\"extra-{i}\"><h2>{_e(title)}</h2><pre>{_e(body)}</pre></section>")
    if checks:
        out.append(_checks(checks))
    if files:
        out.append(_files(files))
    out.append("</body></html>\n")
    return "\n".join(out)
