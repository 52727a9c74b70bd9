"""report.md: per flow the hop table (with the rule or IPVS decision that changed each hop), the
client outcomes, conntrack/IPVS entries, the chains and hook walk of the first packet, the hook
claim checked, model vs kernel, rule counters that moved, a Mermaid sequence diagram, PASS/FAIL
(pure), from the run's hops.json (kpemu.report.runreport)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kpemu.report.mermaid import hop_point, sequence_diagram
from kpemu.report.runreport import ConnectionReport, FlowReport, RunReport, representative, request_hops
from kpemu.report.table import HEADERS, endpoint, hop_rows, opened_line, verdict_lines, verdict_row
from kpemu.report.wireshark import RUN_PCAPNG, commands, flow_pcapng

HOP_HEADERS = (HEADERS[0], "frame", *HEADERS[1:])


def _md_row(cells: tuple[str, ...] | list[str]) -> str:
    """One table row; a cell's line breaks become <br> (a newline would end the row on GitHub)."""
    return "| " + " | ".join(c.replace("|", "\\|").replace("\r", "").replace("\n", "<br>") for c in cells) + " |"


def explain_lines(flow: FlowReport) -> list[str]:
    """Markdown for one hops.json flow's explanation: chains, hooks, the hook claim, oracle, counters, diagram."""
    out: list[str] = []
    trace = flow.get("trace") or {}
    if trace and not trace.get("available"):
        out += [f"Rule tracing: not available ({trace.get('reason')}).", ""]
    chains, hooks = flow.get("chains") or {}, flow.get("hooks") or {}
    if chains or hooks:
        out += ["First packet, per node (from the trace):", "", "| node | kube-proxy chains (nat) | hook walk |",
                "| --- | --- | --- |"]
        for node in list(dict.fromkeys([*hooks, *chains])):
            out.append(_md_row([node, " -> ".join(chains.get(node) or []) or "(none)",
                                (hooks.get(node) or {}).get("text", "")]))
        out.append("")
    claim = flow.get("hook_claim")
    if claim:
        out += [f"Hook claim \"{claim['sentence']}\" on {claim['node']}: "
                f"**{'holds' if claim['right'] else 'does not hold'}**. " + claim["text"], ""]
    oracle = flow.get("oracle") or {}
    if oracle:
        word = {True: "agree", False: "DISAGREE", None: "not checked"}[oracle.get("agree")]
        out += [f"Model oracle vs kernel: **{word}**. {oracle.get('text', '')}", ""]
    for node, rows in (flow.get("counters") or {}).items():
        kube = [r for r in rows if "KUBE-" in r["rule"] or "MASQUERADE" in r["rule"]]
        if kube:
            out += [f"Rule counters that moved on {node} (`iptables-save -c` before and after the flow):", "",
                    "```"] + [f"[{r['packets']}] {r['table']} {r['rule']}" for r in kube] + ["```", ""]
    for node, decs in (flow.get("ipvs_decisions") or {}).items():
        out += [f"IPVS decisions on {node} (connection counters): "
                + "; ".join(f"{d['text']} x{d['connections']}" for d in decs), ""]
    if flow.get("hops"):
        out += ["```mermaid", sequence_diagram(flow).rstrip("\n"), "```", ""]
    return out


def fault_lines(faults: Sequence[Mapping]) -> list[str]:
    """The faults applied to the lab after deploy (or after a flow): what changed, the commands, the symptom."""
    if not faults:
        return []
    out = ["## faults applied after deploy", ""]
    for f in faults:
        when = f" (after flow {f['after']})" if f.get("after") else ""
        out += [f"- **{f['kind']}** on {f['member']} (`{f['netns']}`){when}: {f['change']}.",
                f"  Symptom: {f['symptom']}.", "  Done: " + "; ".join(f"`{c}`" for c in f.get("done") or [])]
    return [*out, ""]


def _answer_lines(c: ConnectionReport) -> list[str]:
    """What the client read on the representative connection (the HTTP status and body)."""
    status = c.get("status")
    head = f"Connection {c['index']} got" + (f" HTTP {status}" if status is not None else "") + ":"
    body = (c.get("reply") or "").strip()
    return [head, "", "```", body[:400] or "(empty)", "```", ""]


def _real_kube_proxy_lines(real: dict[str, Any]) -> list[str]:
    """The real kube-proxy's lines: which one, how fast it synced, and where its rules differ from the model's."""
    build = real.get("build") or {}
    made = (f"built by kpemu from {build.get('release')} with {build.get('go')} at {build.get('built_at')}" if build
            else "built outside kpemu")
    syncs = ", ".join(f"{n} {s:.1f}s" for n, s in (real.get("syncSeconds") or {}).items())
    out = [f"- kube-proxy: the real one, {real.get('version')} ({made}; {real.get('binary')})",
           f"- control plane ready in {real.get('controlPlaneSeconds', 0):.1f}s; first sync per node: {syncs}", ""]
    for line in real.get("resynced") or []:
        out.append(f"- wrote its rules again during the traffic: {line}")
    diffs = real.get("modelVsReal") or []
    out += ["## Model versus the real kube-proxy", ""]
    if not diffs:
        return [*out, "kpemu's model generates the same rules for these objects (model-vs-real.txt is empty).", ""]
    out += [f"{len(diffs)} part(s) differ (`-` the model, `+` the real kube-proxy; whole in model-vs-real.txt):", ""]
    for d in diffs:
        out += [f"### {d['node']}: {d['what']}", "", "```diff", *d["diff"], "```", ""]
    return out


def render_markdown(report: RunReport) -> str:
    """The whole report.md of a run's hops.json."""
    checks = report["checks"]
    ok = all(c["ok"] for c in checks)
    out = [f"# {report['scenario']}: {'PASS' if ok else 'FAIL'}", "",
           f"- runtime: {report['runtime']} ({report['reason']})", f"- kernel: {report['kernel']}",
           f"- duration: {report['seconds']:.2f}s"]
    mode = report.get("mode")
    out += [f"- kube-proxy mode: {mode}"] if mode else []
    real = report.get("kubeProxy")
    out += (_real_kube_proxy_lines(real) if real else [""]) + fault_lines(report.get("faults") or [])
    for flow in report["flows"]:
        rep = representative(flow)
        out += [f"## flow {flow['name']}: {flow['from']} -> {flow['to']} ({flow['protocol']})", ""]
        outcomes = [c["outcome"] for c in flow["connections"]]
        backends = sorted({c["backend"] for c in flow["connections"] if c["backend"]})
        out.append(f"{len(outcomes)} connection(s): "
                   + ", ".join(f"{o} x{outcomes.count(o)}" for o in sorted(set(outcomes)))
                   + (f"; answered by {', '.join(backends)}" if backends else ""))
        out.append("")
        if rep and (rep.get("status") is not None or rep["sport"] is None):  # HTTP, or a container client's command
            out += _answer_lines(rep)
        if rep and rep["hops"]:
            out += [f"Connection {rep['index']} (`{rep['marker']}`, outcome {rep['outcome']}"
                    + (f", backend {rep['backend']}" if rep["backend"] else "") + "):", "",
                    _md_row(HOP_HEADERS), _md_row(["---"] * len(HOP_HEADERS))]
            out += [_md_row([r[0], str(h["frame"] or ""), *r[1:]]) for r, h in zip(hop_rows(rep["hops"]), rep["hops"],
                                                                                     strict=True)]
            verdict = flow.get("verdict")
            if verdict:
                row = verdict_row(verdict)
                out += [_md_row([row[0], "", *row[1:]]), ""]
                out += [f"**{line}**" if i == 0 else line for i, line in enumerate(verdict_lines(verdict))]
            if opened_line(rep):
                out += ["", str(opened_line(rep))]
            tshark, _ = commands(RUN_PCAPNG, flow["name"], rep["index"])
            out += ["", f"Frames are numbered in `{RUN_PCAPNG}` (this flow alone: `{flow_pcapng(flow['name'])}`). "
                    "This connection hop by hop, in tshark (in Wireshark: the same -d, -o and -Y):", "",
                    "```sh", tshark, "```", ""]
        else:
            out += ["No packet of this flow was captured.", ""]
        if rep and rep["conntrack"]:
            out += ["conntrack:", "", "```"] + [f"{e['node']}: {e['line']}" for e in rep["conntrack"]] + ["```", ""]
        if rep and rep["ipvs"]:
            out += ["IPVS connections:", "", "```"] + [f"{e['node']}: {e['line']}" for e in rep["ipvs"]] + ["```", ""]
        per_conn = [c for c in flow["connections"] if c["backend"] or request_hops(c)]
        if len(per_conn) > 1:
            out += ["| conn | outcome | backend | tuple at the backend |", "| --- | --- | --- | --- |"]
            for c in flow["connections"]:
                request = request_hops(c)
                last = request[-1] if request else None
                at = (f"{hop_point(last)}: {endpoint(last['src'], last['sport'])} > "
                      f"{endpoint(last['dst'], last['dport'])}") if last else ""
                out.append(_md_row([str(c["index"]), c["outcome"], c["backend"] or "", at]))
            out.append("")
        out += explain_lines(flow)
    out += ["## expectations", "", "| flow | check | expected | seen | result |", "| --- | --- | --- | --- | --- |"]
    out += [_md_row([c["flow"], c["what"], c["expected"], c["seen"], "PASS" if c["ok"] else "FAIL"]) for c in checks]
    for c in checks:
        if c["diff"]:
            out += ["", f"### {c['flow']}: {c['what']}", "", "```diff", c["diff"], "```"]
    return "\n".join(out) + "\n"
